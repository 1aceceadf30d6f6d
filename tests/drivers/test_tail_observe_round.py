"""Every live plugin folds a round's lines of many sources, seen in one frame, as it folds each
source's batch seen on its own (`TailRounds._handle_all` shows them a round at once)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
import pytest

from logwatch.actions.pids import RunPids
from logwatch.drivers.plugins import TailPlugin, plugin_view
from logwatch.drivers.tail_place import LivePlacement
from logwatch.gpu.link import GpuLink
from logwatch.gpu.sampler import GpuStart
from logwatch.metrics.exporter import MetricsExporter
from logwatch.parse import parse_lines
from logwatch.rules.loader import builtin_rules_dir, load_rules
from logwatch.top.plugin import TopPlugin

NAMES = ("node3/rank0.log", "node3/rank1.log", "node4/rank9.log")


def _lines(rank: int, first: int) -> list[str]:
    """A rank's lines: a run start with a pid, an NCCL line naming its writer and host, step
    lines (a NaN among them), an untimed line and a snapshot."""
    t = f"2026-11-01 00:0{rank % 10}"
    return [
        f"{t}:00,000 INFO [train] run start: run_id=r{rank} pid={4000 + rank} gpus=8",
        f"node{rank // 8}:{100 + rank}:{100 + rank} [{rank % 8}] NCCL INFO Rank {rank}/16 ok",
        *(
            f"{t}:{first + n:02d},000 INFO [train] step {first + n}/900 | loss "
            f"{'nan' if n == 2 else f'{2.0 - n / 10:.2f}'} | grad_norm 1.0 | q_hs={n} "
            f"q_hsb=[1,{n}]"
            for n in range(5)
        ),
        '  File "train.py", line 12, in step',
        f"{t}:30,000 INFO [wandb] snapshot step={first + 4} gpu/0/util=90 gpu/0/mem_gb=60.1",
    ]


def _frames() -> list[pl.DataFrame]:
    return [
        parse_lines(pl.Series(_lines(n * 4, 10 + n), dtype=pl.String), source=name, first_line=1)
        for n, name in enumerate(NAMES)
    ]


def _placement() -> tuple[TailPlugin, Callable[[], Any]]:
    plugin = LivePlacement(followed=lambda: ((name, True) for name in NAMES))
    return plugin, lambda: (plugin.export_state(), [plugin.who()])


def _metrics() -> tuple[TailPlugin, Callable[[], Any]]:
    plugin = MetricsExporter()
    return plugin, lambda: dict(plugin.table.sources)


def _top() -> tuple[TailPlugin, Callable[[], Any]]:
    plugin = TopPlugin(now=lambda: 1000.0)
    return plugin, plugin.rows


def _actions() -> tuple[TailPlugin, Callable[[], Any]]:
    plugin = RunPids()
    return plugin, lambda: [(name, plugin.pid(name), plugin.pid(name, 2)) for name in NAMES]


def _gpu() -> tuple[TailPlugin, Callable[[], Any]]:
    plugin = GpuLink(GpuStart(None, None), load_rules([builtin_rules_dir()]))
    return plugin, lambda: {s: t.info for s, t in plugin.trackers.items()}


@pytest.mark.parametrize("make", [_placement, _metrics, _top, _actions, _gpu])
def test_a_round_at_once_is_each_source_in_turn(
    make: Callable[[], tuple[TailPlugin, Callable[[], Any]]],
) -> None:
    """Two rounds, seen source by source by one plugin and as one frame by another, leave
    both with the same state."""
    (apart, said_apart), (together, said_together) = make(), make()
    for _ in range(2):
        frames = _frames()
        views = [
            f if apart.columns is None else f.select(plugin_view(apart.columns)) for f in frames
        ]
        for view in views:
            apart.observe(view)
        together.observe(pl.concat(views, rechunk=True))
    assert repr(said_together()) == repr(said_apart())  # repr: a NaN loss equals itself
    assert said_apart()  # each saw something
