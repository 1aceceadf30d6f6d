"""Where the default state of `tail` and `top` lives: one directory per watched set, so that two
terminals following different files never share a lock, a checkpoint or a Slack spool.

Without `--state-dir`, the state of `logwatch tail PATTERNS` is `ROOT/watch/<key>` under the
default root (`$XDG_STATE_HOME/logwatch`), the key derived from the resolved patterns (absolute,
normalised, sorted, deduplicated): the same watch from any working directory and in any order is
the same directory, and its lock refuses only a second process watching that same set. Silences
are the user's, not a watch's: they stay in ROOT (`silences_home`), where `logwatch silence`
writes them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from logwatch.atomic import write_atomic
from logwatch.redact import redact

WATCH = "watch"
"""The folder of the root that holds one state directory per watched set."""
MARK = "watching.json"
"""In a watch's state directory: the patterns it is for (for people, and `silences_home`)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
SLUG_MAX = 40


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """$XDG_STATE_HOME/logwatch, else ~/.local/state/logwatch: the state root."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "logwatch"


def resolved_patterns(patterns: Sequence[str], cwd: str | None = None) -> list[str]:
    """The patterns as absolute, normalised paths (`-`, standard input, as it is), sorted and
    without repeats: what a watch is, whatever directory it was started from."""
    base = cwd or os.getcwd()
    out = {
        p if p == "-" else os.path.normpath(os.path.join(base, os.path.expanduser(p)))
        for p in patterns
    }
    return sorted(out)


def watch_key(patterns: Sequence[str], cwd: str | None = None) -> str:
    """`train.log-1f2e3d4c5b6a`: the first pattern's file name (made file-name safe) and a
    hash of every resolved pattern."""
    resolved = resolved_patterns(patterns, cwd)
    digest = hashlib.sha256("\0".join(resolved).encode("utf-8", "surrogateescape")).hexdigest()
    name = "stdin" if resolved[0] == "-" else os.path.basename(resolved[0]) or "root"
    slug = _UNSAFE.sub("_", name).strip("._")[:SLUG_MAX] or "watch"
    more = f"+{len(resolved) - 1}" if len(resolved) > 1 else ""
    return f"{slug}{more}-{digest[:12]}"


def watch_state_dir(root: Path, patterns: Sequence[str], cwd: str | None = None) -> Path:
    """The default state directory of a watch: `ROOT/watch/<key>`."""
    return root / WATCH / watch_key(patterns, cwd)


def mark_watch(state_dir: Path, patterns: Sequence[str], cwd: str | None = None) -> None:
    """Write `watching.json` (0600, masked) naming the patterns the directory is for."""
    data = {"patterns": [redact(p) for p in resolved_patterns(patterns, cwd)]}
    path = state_dir / MARK
    raw = (json.dumps(data, indent=1) + "\n").encode()
    try:
        if not path.is_file() or path.read_bytes() != raw:
            write_atomic(path, raw)
    except OSError:
        pass  # a directory that cannot be written: the tail driver says so, once, and goes on


def silences_home(state_dir: Path) -> Path:
    """Where the silences that apply to `state_dir` live: the root for a watch's directory,
    else the directory itself (an explicit `--state-dir` keeps everything in it)."""
    watches = state_dir.parent
    if watches.name == WATCH and (
        watches.parent == default_state_dir() or (state_dir / MARK).is_file()
    ):
        return watches.parent
    return state_dir
