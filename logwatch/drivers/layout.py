"""Rank and host from a log file's path: torchrun's `--log-dir`, SLURM's `%j`/`%t`/`%N` output
names, DeepSpeed's and NeMo's per-rank files, or a `--layout` pattern."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import PurePath

from logwatch.errors import InputError


@dataclass(frozen=True, slots=True)
class PathIdentity:
    """What a path says of its writer; `group` joins the files one process wrote (torchrun's
    stdout.log and stderr.log of one local rank)."""

    host: str | None = None
    rank: int | None = None  # global
    local: int | None = None
    attempt: str | None = None
    group: str = ""
    node: int | None = None  # the node's index in the job (`{node}`), for `--gpus-per-node`

    def __reduce__(self) -> tuple[type[PathIdentity], tuple[object, ...]]:
        # by its fields: a frozen dataclass's own pickling looks its fields up each time,
        # which the client paid for every file of a run (`replay --jobs/--dask`)
        fields = (self.host, self.rank, self.local, self.attempt, self.group, self.node)
        return (PathIdentity, fields)


_HOST = r"[A-Za-z][\w.-]*"
# Path tails, most specific first; each names what it knows.
_BUILT_IN: tuple[re.Pattern[str], ...] = (
    # torchrun --log-dir D (per host: D=/logs/$HOST): HOST/RUNID/attempt_N/LOCAL/stdout.log
    re.compile(
        rf"(?:^|/)(?P<host>{_HOST})/[^/]+/attempt_(?P<attempt>\d+)/(?P<local>\d+)/"
        r"(?:stdout|stderr)\.log$"
    ),
    re.compile(r"(?:^|/)attempt_(?P<attempt>\d+)/(?P<local>\d+)/(?:stdout|stderr)\.log$"),
    # NeMo exp_manager
    re.compile(r"nemo_log_globalrank-(?P<rank>\d+)_localrank-(?P<local>\d+)\.txt$"),
    # DeepSpeed --enable_each_rank_log: YYYYmmddHHMMSS_rank<N>.log
    re.compile(r"(?:^|/)\d{14}_rank(?P<rank>\d+)\.log$"),
    # SLURM --output: slurm-%j-%N.out (a node), NAME-%j-%t / rank_%t / task%t (a task = a rank)
    re.compile(rf"(?:^|/)slurm-(?P<job>\d+)-(?P<host>{_HOST})\.(?:out|err)$"),
    re.compile(r"(?:^|/)[^/]*?(?:task|rank)[-_]?(?P<rank>\d+)\.(?:out|err|log)$"),
)


def layout_pattern(layout: str) -> re.Pattern[str]:
    """A `--layout` pattern (`{host}/{*}/attempt_{*}/{local_rank}/{*}.log`) as a regex over a
    path's tail: `{host}`, `{rank}`, `{local_rank}`, `{node}` name a part, `{*}` any text in
    one folder name, `{**}` any folders."""
    fields = {
        "host": rf"(?P<host>{_HOST})",
        "rank": r"(?P<rank>\d+)",
        "local_rank": r"(?P<local>\d+)",
        "node": r"(?P<node>\d+)",
        "*": r"[^/]*",
        "**": r".*",
    }
    out: list[str] = []
    for part in re.split(r"(\{[^}]*\})", layout):
        if part.startswith("{") and part.endswith("}"):
            name = part[1:-1]
            if name not in fields:
                raise InputError(
                    f"--layout {layout!r}: unknown field {part} "
                    f"(expected {{host}}, {{rank}}, {{local_rank}}, {{node}}, {{*}} or {{**}})"
                )
            if f"(?P<{name}>" in "".join(out):
                raise InputError(f"--layout {layout!r}: {part} is given twice")
            out.append(fields[name])
        else:
            out.append(re.escape(part))
    return re.compile(r"(?:^|/)" + "".join(out) + "$")


def path_identity(path: str, layout: re.Pattern[str] | None = None) -> PathIdentity:
    """What `path` says of who wrote it (nothing for a path no layout knows); a `--layout`
    first, what it leaves out (the host of `slurm-{*}-node{node}.out`) from the built-ins."""
    own = _identity(path, (layout,)) if layout is not None else None
    built_in = _identity(path, _BUILT_IN)
    if own is None:
        return built_in or PathIdentity(group=PurePath(path).as_posix())
    if built_in is None:
        return own
    return replace(
        own,
        host=own.host if own.host is not None else built_in.host,
        rank=own.rank if own.rank is not None else built_in.rank,
        local=own.local if own.local is not None else built_in.local,
    )


def _identity(path: str, patterns: tuple[re.Pattern[str], ...]) -> PathIdentity | None:
    """What the first of `patterns` that matches `path` says; None when none does."""
    posix = PurePath(path).as_posix()
    for pattern in patterns:
        found = pattern.search(posix)
        if found is None:
            continue
        named = found.groupdict()
        host, rank, local = named.get("host"), named.get("rank"), named.get("local")
        attempt, node = named.get("attempt"), named.get("node")
        # the files of one process: its folder when the file name is only the stream's
        folder = str(PurePath(posix).parent)
        group = folder if local is not None and rank is None else posix
        return PathIdentity(
            host=host,
            rank=int(rank) if rank is not None else None,
            local=int(local) if local is not None else None,
            attempt=attempt,
            group=group,
            node=int(node) if node is not None else None,
        )
    return None
