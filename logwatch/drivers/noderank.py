"""A node's global ranks from what its launcher printed, so that a local rank on it (`[default3]:`,
torchrun's `attempt_0/3/`) gets its global rank without `--gpus-per-node`:

- torch elastic's rendezvous result (`torch/distributed/elastic/agent/server/api.py`, one line
  each under `[default] Rendezvous complete for workers. Result:`): `group_rank=1`,
  `global_ranks=[8, 9, ...]` (the node's workers' global ranks, in local rank order);
- torchrun's launch config (`nproc_per_node   : 8`) and the environment as scripts print it
  (`NODE_RANK=1`, `GROUP_RANK=1`, `LOCAL_WORLD_SIZE=8`, `WORLD_SIZE=16`);
- DeepSpeed's launcher (`deepspeed/launcher/launch.py`): `nnodes=2, num_local_procs=8,
  node_rank=1`, `global_rank_mapping=defaultdict(<class 'list'>, {'node-a': [0, ...], ...})`
  (every host's ranks at once), `dist_world_size=16`.

A node's ranks are known when its `global_ranks` list is, or its group rank and its number of
local ranks (`LOCAL_WORLD_SIZE`, `nproc_per_node`, `num_local_procs`, else `--gpus-per-node`):
`group_rank x local world size + local rank`, as torchrun assigns them on equal nodes. A file
that says two different values of one of these (a restart that changed the membership) says
nothing: no rank is better than a wrong one."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import polars as pl

NODE_WORDS = [
    *("group_rank=", "global_ranks=", "NODE_RANK", "GROUP_RANK", "WORLD_SIZE"),
    *("nproc_per_node", "num_local_procs=", "global_rank_mapping=", "dist_world_size="),
]
"""Literal words one of which every line `NODE_PATTERNS` reads has (`WORLD_SIZE` covers
`LOCAL_WORLD_SIZE`)."""
_NOT_NAME = r"(?:^|[^A-Za-z0-9_])"  # the name starts here (no look-behind in polars' regex)
NODE_PATTERNS: tuple[tuple[str, str], ...] = (
    ("group_rank=", rf"{_NOT_NAME}group_rank=(?P<gnode>\d+)"),
    ("global_ranks=", rf"{_NOT_NAME}global_ranks=\[(?P<granks>\d+(?:, ?\d+)*)\]"),
    ("_RANK", rf"{_NOT_NAME}(?:NODE|GROUP)_RANK\s*[=:]\s*['\"]?(?P<gnode>\d+)"),
    ("WORLD_SIZE", rf"{_NOT_NAME}LOCAL_WORLD_SIZE\s*[=:]\s*['\"]?(?P<gper>\d+)"),
    ("WORLD_SIZE", rf"{_NOT_NAME}WORLD_SIZE\s*[=:]\s*['\"]?(?P<gworld>\d+)"),
    ("nproc_per_node", rf"{_NOT_NAME}nproc_per_node\s*[=:]\s*(?P<gper>\d+)"),
    (
        "num_local_procs=",
        r"num_local_procs=(?P<gper>\d+)(?:, node_rank=(?P<gnode>\d+))?",
    ),
    ("global_rank_mapping=", r"global_rank_mapping=(?P<gmap>.*\{.*\}.*)$"),
    ("dist_world_size=", r"dist_world_size=(?P<gworld>\d+)"),
)
"""(literal word, pattern): what a line says of its node (`gnode`: the node's group rank,
`gper`: its local world size, `granks`: its global ranks, `gmap`: DeepSpeed's host to ranks
map) or of the world (`gworld`: taken only where no NCCL or process group line says it)."""
NODE_SCHEMA: dict[str, pl.DataType] = {
    "gnode": pl.Int64(),
    "gper": pl.Int64(),
    "granks": pl.String(),
    "gmap": pl.String(),
    "gworld": pl.Int64(),
}
"""The fact columns `NODE_PATTERNS` add."""
_HOST_RANKS = re.compile(r"""['"]([^'"]+)['"]\s*:\s*\[(\d+(?:,\s*\d+)*)?\]""")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.split(r",\s*", text.strip()) if part)


def mapped_hosts(gmap: str) -> dict[str, tuple[int, ...]]:
    """DeepSpeed's `global_rank_mapping` text: each host's global ranks, in local rank order."""
    return {host: _ints(ranks or "") for host, ranks in _HOST_RANKS.findall(gmap)}


def one(values: Iterable[int | str | None]) -> int | str | None:
    """The one value said (None when none was, or several were)."""
    said = {value for value in values if value is not None}
    return next(iter(said)) if len(said) == 1 else None


def node_globals(
    nodes: Iterable[int | None],
    per_node: Iterable[int | None],
    lists: Iterable[str | None],
    gpus_per_node: int | None,
) -> tuple[int, ...] | None:
    """The global ranks of a node's local ranks 0, 1, ... from what one file said of it: its
    `global_ranks` list, else its group rank times its local world size (said, else
    `gpus_per_node`) plus each local rank; None when not known."""
    listed = one(lists)
    if isinstance(listed, str):
        return _ints(listed)
    node, size = one(nodes), one(per_node)
    size = size if isinstance(size, int) else gpus_per_node
    if not isinstance(node, int) or not size:
        return None
    return tuple(range(node * size, (node + 1) * size))


NodeFact = tuple[str, int | None, int | None, str | None, str | None]
"""A source and what one of its lines said of its node: group rank, local world size, global
ranks, DeepSpeed's host map (the node columns of a `logwatch.drivers.lineinfo.Fact`)."""


def learn_nodes(
    said: Sequence[NodeFact],
    gpus_per_node: int | None,
    host_local: dict[tuple[str, int], int],
    rank_host: dict[int, str],
) -> dict[str, tuple[int, ...]]:
    """Each source's node's global ranks (local rank order) where its lines tell them; every
    host of a DeepSpeed map into `host_local` ((host, local rank): rank) and `rank_host`."""
    by_source: dict[str, list[NodeFact]] = {}
    for fact in said:
        if fact[4] is not None:
            for host, listed in mapped_hosts(fact[4]).items():
                for local, rank in enumerate(listed):
                    host_local.setdefault((host, local), rank)
                    rank_host.setdefault(rank, host)
        if fact[1] is not None or fact[2] is not None or fact[3] is not None:
            by_source.setdefault(fact[0], []).append(fact)
    out: dict[str, tuple[int, ...]] = {}
    for source, facts in by_source.items():
        ranks = node_globals(
            (f[1] for f in facts), (f[2] for f in facts), (f[3] for f in facts), gpus_per_node
        )
        if ranks is not None:
            out[source] = ranks
    return out


def host_ranks(
    source_globals: dict[str, tuple[int, ...]],
    source_host: dict[str, str],
    host_local: dict[tuple[str, int], int],
    rank_host: dict[int, str],
) -> None:
    """A described node's ranks under its host once the source's host is known, so the other
    files of that host (torchrun's `attempt_0/L/` files beside the agent's log) find theirs."""
    for source, ranks in source_globals.items():
        host = source_host.get(source)
        if host is None:
            continue
        for local, rank in enumerate(ranks):
            host_local.setdefault((host, local), rank)
            rank_host.setdefault(rank, host)


def late_hosts(
    unplaced: dict[str, tuple[int, ...]],
    source_host: dict[str, str],
    host_local: dict[tuple[str, int], int],
    rank_host: dict[int, str],
) -> None:
    """The ranks of nodes described by files seen before their host was named (`unplaced`:
    `node-017/agent.log`, read before `node-017/.../attempt_0/3/stderr.log` named node-017),
    under a host `source_host` names that is a folder of the describing file's path."""
    hosts = set(source_host.values())
    for source, ranks in unplaced.items():
        if source in source_host:
            continue
        named = [part for part in re.split(r"[/\\]", source) if part in hosts]
        if named:
            host_ranks({source: ranks}, {source: named[-1]}, host_local, rank_host)
