"""What a checkpoint holds: every followed file's identity and offset, each source's engine
state, the plugins' state; as the JSON object `checkpoint.json` stores. `checkpoint.py` writes
and reads it (whole, or as `delta.py`'s lines of what changed); both import it from here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from logwatch.sources.follow import Position
from logwatch.statecheck import INT, LIST, OBJECT, fields

VERSION = 1


_FIELDS = {"files": LIST, "sources": OBJECT}
_OPTIONAL = {"extras": OBJECT, "seq": INT}


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where every followed file stands, and the engine state of every source."""

    files: list[Position] = field(default_factory=list)
    sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    extras: Mapping[str, Any] = field(default_factory=dict)  # state of the driver's hooks
    # each source's state as `delta.py`'s JSON text, where the driver has it already (from an
    # earlier checkpoint, its state unchanged since): not serialized again
    source_texts: Mapping[str, str] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The checkpoint file's JSON object."""
        return {
            "version": VERSION,
            "files": [pos.to_json() for pos in self.files],
            "sources": dict(self.sources),
            "extras": dict(self.extras),
        }

    @classmethod
    def from_json(cls, data: Any) -> Checkpoint:
        """Parse a checkpoint file's object; ValueError saying what is wrong."""
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ValueError(f"not a version-{VERSION} logwatch checkpoint")
        fields(data, _FIELDS, "checkpoint", optional_fields=_OPTIONAL)
        files, sources, extras = data["files"], data["sources"], data.get("extras", {})
        return cls([Position.from_json(item) for item in files], sources, extras)
