"""A watch taking over what an older logwatch left in the one default state directory it used
for everything (`ROOT/checkpoint.json`): the entries of the files this watch follows move to the
watch's own directory, so nothing is read twice and no checkpoint is lost; the entries of other
files stay for the watches of those files. The first watch to take over also takes the sinks'
state (Slack's outbox and message map, Alertmanager's), so queued alerts are still delivered and
resolves still edit their messages."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from logwatch.drivers.checkpoint import CHECKPOINT, StateDir
from logwatch.drivers.checkpoint_record import Checkpoint
from logwatch.errors import StateError
from logwatch.sources.fileset import FileSet
from logwatch.sources.follow import Position

SINK_STATE = (
    "slack-spool.jsonl",
    "notify-state.json",
    "notify-events.jsonl",
    "slack-dead-letter.jsonl",
    "alertmanager.json",
)
"""The sinks' files in a state directory (see `logwatch/sinks/`)."""


def adopt_legacy_state(
    root: Path, target: Path, patterns: Sequence[str], status: Callable[[str], None]
) -> None:
    """Move ROOT's checkpoint entries of the files `patterns` match into `target` (which has no
    checkpoint yet), said in one line on `status`. StateError when an older logwatch still runs
    on ROOT (its lock is held): two processes must not follow the same files."""
    if not (root / CHECKPOINT).is_file() or (target / CHECKPOINT).exists():
        return
    legacy = StateDir(root, status)
    legacy.open()
    try:
        checkpoint = legacy.load()
        ours = _followed(checkpoint.files if checkpoint else [], patterns)
        if checkpoint is None or not ours:
            return
        sources = {pos.source for pos in ours}
        mine = StateDir(target, status)
        mine.open()
        try:
            moved = Checkpoint(
                ours,
                {s: d for s, d in checkpoint.sources.items() if s in sources},
                checkpoint.extras,
            )
            if not mine.save(moved):
                raise StateError(f"{target}: cannot write the checkpoint taken over from {root}")
            for key in sorted(legacy.emitted()):  # after the save, which empties the journal
                mine.record_emitted(key)
            sinks = _move_sink_state(root, target)
        finally:
            mine.close()
        rest = Checkpoint(
            [pos for pos in checkpoint.files if pos.source not in sources],
            {s: d for s, d in checkpoint.sources.items() if s not in sources},
            checkpoint.extras,
        )
        journal = legacy.emitted()
        legacy.save(rest)
        for key in sorted(journal):  # kept for the watches that take the other files
            legacy.record_emitted(key)
    finally:
        legacy.close()
    also = f" and the sinks' state ({', '.join(sinks)})" if sinks else ""
    status(
        f"took over the checkpoint of {len(ours)} file{'s' if len(ours) != 1 else ''}{also} "
        f"from {root} (older logwatch kept all state there); this watch's state is now {target}"
    )


def _followed(files: Sequence[Position], patterns: Sequence[str]) -> list[Position]:
    """The checkpointed files that the patterns match now (same device and inode)."""
    keys = set()
    for path in FileSet([p for p in patterns if p != "-"]).expand():
        with contextlib.suppress(OSError):
            st = os.stat(path)
            keys.add((st.st_dev, st.st_ino))
    return [pos for pos in files if (pos.dev, pos.ino) in keys]


def _move_sink_state(root: Path, target: Path) -> list[str]:
    """Move the sinks' files that `target` lacks; the names moved."""
    moved = []
    for name in SINK_STATE:
        if (root / name).is_file() and not (target / name).exists():
            os.replace(root / name, target / name)
            moved.append(name)
    return moved
