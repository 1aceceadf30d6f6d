"""Incremental checkpoints: what changed since the last one, as one appended JSON line.

With thousands of files followed, rewriting every entry each second (1.8 MiB for 2000 files)
costs more than the lines read. So `checkpoint.json` (the base, numbered `seq`) is followed by
`checkpoint.delta`, one line per later checkpoint holding only the file entries and engine
states that changed, plus what went away. Loading applies the lines numbered above the base;
a torn last line (a crash mid-append) is skipped, the one before it still counts. The base is
rewritten (and the delta emptied) once the delta grows past half its size.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from logwatch.drivers.checkpoint_record import Checkpoint
from logwatch.statecheck import INT, LIST, OBJECT, fields, is_kind


def _key(entry: Mapping[str, Any]) -> str:
    return f"{entry['dev']}:{entry['ino']}"


class DeltaTracker:
    """Remembers what the last saved checkpoint held, entry by entry (as JSON text, so that
    later changes to the engine's own objects cannot hide a difference)."""

    def __init__(self) -> None:
        self.files: dict[str, str] | None = None  # None: the next save must be a full one
        self.sources: dict[str, str] = {}
        self.base_bytes = self.delta_bytes = 0

    def record(self, checkpoint: Checkpoint, seq: int) -> dict[str, Any] | None:
        """The delta line for `checkpoint`, or None when a full save is due instead."""
        if self.files is None or self.delta_bytes * 2 > max(self.base_bytes, 1 << 16):
            return None
        files, sources = _texts(checkpoint)
        return {
            "seq": seq,
            "files": {k: json.loads(v) for k, v in files.items() if self.files.get(k) != v},
            "gone": [k for k in self.files if k not in files],
            "sources": {s: json.loads(v) for s, v in sources.items() if self.sources.get(s) != v},
            "gone_sources": [s for s in self.sources if s not in sources],
            "extras": dict(checkpoint.extras),
        }

    def saved(self, checkpoint: Checkpoint, size: int, *, full: bool) -> None:
        """A save of `checkpoint` (`size` bytes, full or a delta line) is durable."""
        self.files, self.sources = _texts(checkpoint)
        if full:
            self.base_bytes, self.delta_bytes = size, 0
        else:
            self.delta_bytes += size

    def invalidate(self) -> None:
        """A delta write failed (maybe half done): the next save rewrites the base."""
        self.files = None


def _texts(checkpoint: Checkpoint) -> tuple[dict[str, str], dict[str, str]]:
    files = {_key(e): json.dumps(e, sort_keys=True) for e in checkpoint.to_json()["files"]}
    sources = {s: json.dumps(v, sort_keys=True) for s, v in checkpoint.sources.items()}
    return files, sources


_RECORD = {"seq": INT, "files": OBJECT, "gone": LIST, "sources": OBJECT, "gone_sources": LIST}
_EXTRAS = {"extras": OBJECT}


def apply_deltas(base: Any, raw: bytes) -> Any:
    """The base checkpoint object with the delta lines numbered above its `seq` applied."""
    if not isinstance(base, dict) or not isinstance(base.get("files"), list):
        return base  # Checkpoint.from_json says what is wrong with it
    entries_ok = all(isinstance(e, dict) and "dev" in e and "ino" in e for e in base["files"])
    if not entries_ok or not isinstance(base.get("sources"), dict):
        return base
    seq = base.get("seq", 0)
    if not is_kind(seq, INT):
        return base  # Checkpoint.from_json's caller says what is wrong with it
    files = {_key(e): e for e in base["files"]}
    sources, extras = dict(base["sources"]), base.get("extras", {})
    for line in raw.splitlines():
        try:
            record = fields(json.loads(line), _RECORD, "delta line", optional_fields=_EXTRAS)
            names = [*record["gone"], *record["gone_sources"]]
            if not all(isinstance(name, str) for name in names):
                raise ValueError("delta line: 'gone' and 'gone_sources' must list names")
        except ValueError:
            continue  # a torn last line (the crash came mid-append), or not one of ours
        if not record["seq"] > seq:
            continue
        changed_files, changed_sources = dict(record["files"]), dict(record["sources"])
        gone, gone_sources = list(record["gone"]), list(record["gone_sources"])
        files.update(changed_files)
        sources.update(changed_sources)
        for key in gone:
            files.pop(key, None)
        for source in gone_sources:
            sources.pop(source, None)
        extras, seq = record.get("extras", extras), record["seq"]
    return {**base, "files": list(files.values()), "sources": sources, "extras": extras}
