"""Silences: time-bounded mutes by rule and source glob, kept in the state directory.

A running process re-reads the file whenever it changes (size or mtime), so `logwatch silence add`
takes effect without a restart; an expired silence simply stops matching.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from logwatch.errors import LogwatchError

FILE = "silences.json"


class SilenceError(LogwatchError):
    """A silence command failed (unknown id, broken file)."""


@dataclass(frozen=True, slots=True)
class Silence:
    """Mute alerts of `rule` (a glob) on sources matching `source` (a glob) until `ends`."""

    id: str
    rule: str
    source: str
    starts: datetime
    ends: datetime
    comment: str
    author: str = ""

    def active(self, now: datetime) -> bool:
        """Whether it mutes at `now`."""
        return self.starts <= now < self.ends

    def matches(self, rule: str, source: str) -> bool:
        """Whether it covers this alert."""
        return fnmatchcase(rule, self.rule) and fnmatchcase(source, self.source)

    def to_json(self) -> dict[str, Any]:
        """As stored."""
        data = asdict(self)
        data["starts"], data["ends"] = self.starts.isoformat(), self.ends.isoformat()
        return data


class SilenceStore:
    """The silences file of one state directory."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE
        self._stamp: tuple[int, int, int] | None = None
        self._cache: list[Silence] = []

    def all(self) -> list[Silence]:
        """Every stored silence, re-read if the file changed since the last call."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._cache = None, []
            return []
        except OSError as exc:
            raise self._unusable("read", exc) from None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self._cache, self._stamp = self._read(), stamp
        return list(self._cache)

    def _read(self) -> list[Silence]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise self._unusable("read", exc) from None
        try:
            raw = json.loads(text or "[]")
            return [
                Silence(
                    **{
                        **item,
                        "starts": datetime.fromisoformat(item["starts"]),
                        "ends": datetime.fromisoformat(item["ends"]),
                    }
                )
                for item in raw
            ]
        except (ValueError, TypeError, KeyError) as exc:
            raise SilenceError(
                f"{self.path}: broken silences file ({exc}); fix or delete it"
            ) from None

    def muting(self, rule: str, source: str, now: datetime) -> Silence | None:
        """The active silence covering this alert, if any."""
        for silence in self.all():
            if silence.active(now) and silence.matches(rule, source):
                return silence
        return None

    def add(
        self, rule: str, source: str, duration_s: float, comment: str, now: datetime
    ) -> Silence:
        """Store a new silence starting now."""
        silence = Silence(
            id=secrets.token_hex(4),
            rule=rule,
            source=source,
            starts=now,
            ends=now + timedelta(seconds=duration_s),
            comment=comment,
            author=os.environ.get("USER", ""),
        )
        self._update(lambda items: [*items, silence])
        return silence

    def expire(self, silence_id: str, now: datetime) -> Silence:
        """End a silence now."""
        found = [s for s in self.all() if s.id == silence_id]
        if not found:
            known = ", ".join(s.id for s in self.all()) or "none"
            raise SilenceError(f"no silence with id {silence_id!r} in {self.path} (known: {known})")
        ended = Silence(**{**asdict(found[0]), "ends": min(found[0].ends, now)})
        self._update(lambda items: [ended if s.id == silence_id else s for s in items])
        return ended

    def _update(self, change: Any) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path.with_suffix(".lock"), "a") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                self._stamp = None
                items = change(self.all())
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(json.dumps([s.to_json() for s in items], indent=1), encoding="utf-8")
                os.replace(tmp, self.path)
        except OSError as exc:
            raise self._unusable("write", exc) from None

    def _unusable(self, action: str, exc: OSError) -> SilenceError:
        folder = self.path.parent
        why = (
            "not a directory"
            if folder.exists() and not folder.is_dir()
            else f"{exc.filename or self.path}: {exc.strerror or exc}"
        )
        return SilenceError(
            f"cannot {action} silences in {folder} ({why}); "
            f"give --state-dir a directory you can {action} (or none for the default)"
        )


def check_rule(rule: str, rule_ids: Iterable[str]) -> None:
    """SilenceError unless the glob `rule` matches one of the loaded rule ids (a typo would
    otherwise silence nothing, silently)."""
    known = sorted(set(rule_ids))
    if not any(fnmatchcase(rule_id, rule) for rule_id in known):
        raise SilenceError(
            f"no rule matches {rule!r} (known: {', '.join(known) or 'none'}); "
            "give a rule id or a glob such as 'gpu-*'"
        )
