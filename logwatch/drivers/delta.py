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
from collections.abc import Callable, Container, Iterable, Mapping
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
        self._made: tuple[Checkpoint, dict[str, str], dict[str, str]] | None = None

    def record(self, checkpoint: Checkpoint, seq: int) -> str | None:
        """The delta line for `checkpoint` (JSON text, no newline), or None when a full save
        is due instead. The changed entries' texts go into it as they are: each entry is
        serialized once per save (`saved` keeps the same texts), not parsed back and again."""
        if self.files is None or self.delta_bytes * 2 > max(self.base_bytes, 1 << 16):
            return None
        files, sources = self._texts(checkpoint)
        old_files, old_sources = self.files, self.sources
        changed = _members((k, v) for k, v in files.items() if old_files.get(k) != v)
        changed_sources = _members((s, v) for s, v in sources.items() if old_sources.get(s) != v)
        gone = _compact([k for k in old_files if k not in files])
        gone_sources = _compact([s for s in old_sources if s not in sources])
        extras = _compact(dict(checkpoint.extras))
        return (
            f'{{"seq":{seq},"files":{changed},"gone":{gone},"sources":{changed_sources},'
            f'"gone_sources":{gone_sources},"extras":{extras}}}'
        )

    def saved(self, checkpoint: Checkpoint, size: int, *, full: bool) -> None:
        """A save of `checkpoint` (`size` bytes, full or a delta line) is durable."""
        self.files, self.sources = self._texts(checkpoint)
        self._made = None
        if full:
            self.base_bytes, self.delta_bytes = size, 0
        else:
            self.delta_bytes += size

    def full(self, checkpoint: Checkpoint, seq: int) -> str:
        """The whole of `checkpoint` as `checkpoint.json`'s text, numbered `seq`: its sources'
        texts (`_texts`) spliced in, not serialized again."""
        _, sources = self._texts(checkpoint)
        data = checkpoint.to_json()
        return (
            f'{{"version":{_compact(data["version"])},"files":{_compact(data["files"])},'
            f'"sources":{_members(sources.items())},"extras":{_compact(data["extras"])},'
            f'"seq":{seq}}}'
        )

    def invalidate(self) -> None:
        """A delta write failed (maybe half done): the next save rewrites the base."""
        self.files = None

    def _texts(self, checkpoint: Checkpoint) -> tuple[dict[str, str], dict[str, str]]:
        """The entries' texts of `checkpoint`, made once for its `record` and `saved`."""
        if self._made is not None and self._made[0] is checkpoint:
            return self._made[1], self._made[2]
        files = {_key(e): _compact(e) for e in checkpoint.to_json()["files"]}
        texts = checkpoint.source_texts
        sources = {s: texts.get(s) or _compact(v) for s, v in checkpoint.sources.items()}
        self._made = (checkpoint, files, sources)
        return files, sources


def _compact(value: Any) -> str:
    """`value` as a checkpoint's JSON text of it: compact, keys sorted (the same value gives
    the same text, in whatever order its dicts were built)."""
    return _ENCODER.encode(value)


_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)
"""`json.dumps(value, separators=(",", ":"), sort_keys=True)`'s encoder, made once: `dumps`
makes one per call when given options, which costs as much as encoding a small state."""


def _members(items: Iterable[tuple[str, str]]) -> str:
    """A JSON object of names to entries that are JSON texts already."""
    return "{" + ",".join(f"{json.dumps(name)}:{text}" for name, text in items) + "}"


class SourceTexts:
    """Each followed source's engine state and its JSON text, as the last checkpoint exported
    them. A checkpoint exports again only the sources whose state may have changed since (the
    driver's `touched`): with thousands of files followed, most are quiet in any one second."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[Mapping[str, Any], str]] = {}

    def export(
        self,
        sources: Iterable[str],
        touched: Container[str],
        export: Callable[[str], Mapping[str, Any]],
    ) -> tuple[dict[str, Mapping[str, Any]], dict[str, str]]:
        """Each source's state and text (`export(source)` for a touched or new one); the
        sources not given are forgotten."""
        kept: dict[str, tuple[Mapping[str, Any], str]] = {}
        for source in sources:
            entry = self._kept.get(source)
            if entry is None or source in touched:
                state = export(source)
                entry = (state, _compact(state))
            kept[source] = entry
        self._kept = kept
        return {s: state for s, (state, _) in kept.items()}, {s: t for s, (_, t) in kept.items()}


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
