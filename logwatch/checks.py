"""One check's outcome, as `logwatch doctor` prints it: the record doctor and the sinks' own
checks (`sinks/slack/checks.py`) share."""

from __future__ import annotations

from dataclasses import dataclass

from logwatch.redact import redact


@dataclass(frozen=True, slots=True)
class Check:
    """One check's outcome; a failed required check makes doctor exit 1."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True

    def line(self) -> str:
        """As doctor prints it."""
        tag = "ok  " if self.ok else ("FAIL" if self.required else "warn")
        text = f"{tag} {self.name}: {self.detail}"
        if not self.ok and self.fix:
            text += f" — fix: {self.fix}"
        return redact(text)
