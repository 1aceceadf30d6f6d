"""`tail` places events as replay does (`logwatch/drivers/tail_place.py`): each rank's log of a
fleet followed live (the real watchdog observer, real files written while it runs) gives every
event the rank, host and carried line time replay gives it, in the torchrun per-host layout,
SLURM's `[defaultL]:` node files and `srun -l`'s `N: ` file; a restarted tail labels the same."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from logwatch.alerts import AlertEvent
from logwatch.drivers.replay import ReplayOptions, replay
from logwatch.testing import running
from tests.support.paths import load_bench
from tests.support.placement import comparable
from tests.support.tailkit import BUILTIN, Tail

gen = load_bench("gen_fleet")


def _by_place(events: list[AlertEvent]) -> dict[tuple[str, int, str, str], dict[str, Any]]:
    """Events (but the verdict) by source, line, rule and status: the two drivers send a
    fleet's files in different orders."""
    return {(d["source"], d["line"], d["rule"], d["status"]): d for d in comparable(events)}


def _tail_as_written(
    run_root: Path, tmp_path: Path, patterns: tuple[str, ...], **options: Any
) -> tuple[Tail, list[Path]]:
    """A tail of `patterns` under `tmp_path/live`, started on no file; then each file of the
    generated run copied in (history first, then its last lines), as a job writes them."""
    live = tmp_path / "live"
    live.mkdir()
    tail = Tail(live, patterns=patterns, rules=BUILTIN, **options)
    files = sorted(p for p in run_root.rglob("*") if p.is_file())
    copies = []
    with running(tail.driver) as driver:
        driver.sync()
        for path in files:
            target = live / path.relative_to(run_root)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = path.read_bytes()
            cut = data.rfind(b"\n", 0, len(data) * 2 // 3) + 1  # two writes: as a run grows
            target.write_bytes(data[:cut])
            copies.append(target)
            driver.sync()
            with open(target, "ab") as out:
                out.write(data[cut:])
            driver.sync()
        tail.settle()
    return tail, copies


@pytest.mark.parametrize(
    ("layout", "patterns"),
    [
        ("torchrun", ("*/*/attempt_*/*/*.log", "*/kern.log")),
        ("slurm-default", ("*.out", "dmesg/*.log")),
        ("slurm-label", ("*.out", "dmesg/*.log")),
    ],
)
def test_a_tailed_fleet_is_placed_as_replay_places_it(
    tmp_path: Path, layout: str, patterns: tuple[str, ...]
) -> None:
    """Every event of a 16-rank run tailed as its files grow carries the labels (rank, host,
    local rank, carried time) and fingerprint replay gives it; the culprit's CUDA error names
    its global rank and host."""
    spec = gen.FleetSpec(ranks=16, steps=3, layout=layout, cause="illegal-address", mode="exits")
    run = gen.generate(tmp_path / "run", spec)
    tail, copies = _tail_as_written(run.root, tmp_path, patterns)
    got = _by_place(tail.sink.events)
    want = _by_place(replay([str(p) for p in copies], BUILTIN).events)
    assert got == want
    errors = [d for d in got.values() if d["rule"] == "cuda-error"]
    assert [(d["labels"]["rank"], d["labels"]["host"]) for d in errors] == [
        (str(run.culprit_rank), run.culprit_host)
    ]
    assert all("rank" in d["labels"] for d in got.values() if d["rule"] == "nccl-timeout")


def test_a_node_file_tailed_alerts_once_per_rank(tmp_path: Path) -> None:
    """SLURM `[defaultL]:` node files: each rank's NCCL timeout is its own alert, as in replay
    (8 ranks per node, the culprit's node-mates stopped, the other node's 8 all timing out)."""
    spec = gen.FleetSpec(ranks=16, steps=3, layout="slurm-default", cause="xid79", mode="exits")
    run = gen.generate(tmp_path / "run", spec)
    tail, _ = _tail_as_written(run.root, tmp_path, ("*.out",))
    timeouts = [e for e in tail.sink.events if e.rule == "nccl-timeout"]
    other = 1 - run.culprit_rank // 8
    assert sorted(int(e.labels["rank"]) for e in timeouts) == [other * 8 + i for i in range(8)]
    assert len({e.fingerprint for e in timeouts}) == 8


NODE_FILE = [
    "[default3]:node-007:41:41 [3] NCCL INFO comm 0x1 rank 59 nRanks 64 nNodes 8 localRanks 8",
    "[default3]:2026-12-07 02:00:32,008 INFO train.py:212 step 1 loss 2.4990",
    "[default3]:2026-12-07 02:00:34,008 INFO train.py:212 step 2 loss 2.4980",
]
OOM = (
    "[default3]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 3 "
    "has a total capacity of 79.15 GiB of which 1.19 GiB is free."
)


def test_a_restarted_tail_labels_with_what_it_knew_before(tmp_path: Path) -> None:
    """The rank map (an NCCL line) and the last timed line come before a restart; the CUDA OOM
    after it, untimed, still gets rank 59, host node-007 and the time of line 3, as replay
    gives it: both are in the checkpoint."""
    log = tmp_path / "slurm-77-node-007.out"
    log.write_text("\n".join(NODE_FILE) + "\n")
    first = Tail(tmp_path, patterns=("*.out",), rules=BUILTIN)
    with running(first.driver) as driver:
        driver.sync()
    assert first.sink.events == []
    again = Tail(tmp_path, patterns=("*.out",), rules=BUILTIN)
    with running(again.driver) as driver:
        driver.sync()
        with open(log, "a") as out:
            out.write(OOM + "\n")
        driver.sync()
    (event,) = again.sink.events
    assert event.rule == "cuda-oom"
    assert dict(event.labels) == {
        "rank": "59",
        "local_rank": "3",
        "host": "node-007",
        "ts_from_line": "3",
    }
    assert event.ts is not None and event.ts.isoformat() == "2026-12-07T02:00:34.008000"
    assert comparable([event]) == comparable(replay([str(log)], BUILTIN).events)


def test_a_firing_alert_resolves_with_its_labels_after_a_restart(tmp_path: Path) -> None:
    """A NaN alert fired before a restart and ended after it by a `run start:` line: the
    resolve carries the labels and the fingerprint of the firing (Alertmanager and Slack match
    them by it); its rank, 59, was named only by an NCCL line before the restart."""
    log = tmp_path / "slurm-77-node-007.out"
    nan = "[default3]:2026-12-07 02:00:36,008 INFO train.py:212 step 3 loss nan"
    log.write_text("\n".join([*NODE_FILE, nan]) + "\n")
    first = Tail(tmp_path, patterns=("*.out",), rules=BUILTIN, start="beginning")
    with running(first.driver) as driver:
        driver.sync()
    (fired,) = [e for e in first.sink.events if e.rule == "nan-loss"]
    assert fired.labels["rank"] == "59"
    again = Tail(tmp_path, patterns=("*.out",), rules=BUILTIN)
    with running(again.driver) as driver:
        driver.sync()
        with open(log, "a") as out:  # the agent's own line, no rank prefix: ends the run
            out.write("2026-12-07 02:01:00,000 INFO [train] run start: run_id=b pid=200\n")
        driver.sync()
    resolved = [e for e in again.sink.events if e.rule == "nan-loss"]
    assert [e.status for e in resolved] == ["resolved"]
    assert resolved[0].fingerprint == fired.fingerprint
    assert resolved[0].labels == fired.labels


def test_layout_and_gpus_per_node_give_tail_the_global_rank(tmp_path: Path) -> None:
    """`--layout 'node{node}/train.out' --gpus-per-node 8`: a `[default3]:` line of node 2's
    file is rank 19, in tail as in replay; without --gpus-per-node only its local rank."""
    folder = tmp_path / "node2"
    folder.mkdir()
    log = folder / "train.out"
    log.write_text("\n".join([NODE_FILE[1], OOM]) + "\n")
    layout = "node{node}/train.out"
    tail = Tail(tmp_path, patterns=("*/train.out",), rules=BUILTIN, layout=layout, gpus_per_node=8)
    with running(tail.driver) as driver:
        driver.sync()
    (event,) = tail.sink.events
    assert event.labels["rank"] == "19" and event.labels["local_rank"] == "3"
    options = ReplayOptions(layout=layout, gpus_per_node=8)
    assert comparable([event]) == comparable(replay([str(log)], BUILTIN, options=options).events)
    alone = replay([str(log)], BUILTIN, options=ReplayOptions(layout=layout)).events
    assert "rank" not in alone[0].labels and alone[0].labels["local_rank"] == "3"


def test_a_rotated_node_file_keeps_its_writers(tmp_path: Path) -> None:
    """A node file renamed away (out of the pattern's sight) while a new one takes its name:
    the old file's later CUDA OOM, now of the source `... (rotated)`, still names rank 59 of
    node-007 (its NCCL line came before the rename); the new file's knows no rank 59."""
    log = tmp_path / "slurm-77-node-007.out"
    (tmp_path / "archive").mkdir()
    moved = tmp_path / "archive" / "slurm-77-node-007.out"
    tail = Tail(tmp_path, patterns=("*.out",), rules=BUILTIN)
    with running(tail.driver) as driver:
        log.write_text("\n".join(NODE_FILE) + "\n")
        driver.sync()
        os.rename(log, moved)
        log.write_text(NODE_FILE[1] + "\n")  # the next job's file under the same name
        driver.sync()
        with open(moved, "a") as out:
            out.write(OOM + "\n")
        driver.sync()
    (event,) = [e for e in tail.sink.events if e.rule == "cuda-oom"]
    assert event.source == f"{log} (rotated)"
    assert (event.labels["rank"], event.labels["host"]) == ("59", "node-007")


def test_tail_gives_a_node_files_local_rank_the_global_rank_its_rendezvous_lines_give(
    tmp_path: Path,
) -> None:
    """A SLURM node file followed live: torch elastic's rendezvous result (`group_rank=17`,
    `global_ranks=[136, ...]`) comes first, then `[default3]:`'s NCCL timeout: rank 139 of
    node-017, as replay says (`logwatch/drivers/noderank.py`)."""
    log = tmp_path / "slurm-4242-node-017.out"
    ranks = ", ".join(str(136 + local) for local in range(8))
    head = [
        "[default] Rendezvous complete for workers. Result:",
        "  group_rank=17",
        f"  global_ranks=[{ranks}]",
    ]
    timeout = (
        "[default3]:[E1207 02:10:39.208820 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=88811, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600008 milliseconds before timing out."
    )
    tail = Tail(tmp_path, patterns=("*.out",), rules=BUILTIN)
    with running(tail.driver) as driver:
        log.write_text("\n".join(head) + "\n")
        driver.sync()
        with open(log, "a") as out:
            out.write(timeout + "\n")
        driver.sync()
    (event,) = [e for e in tail.sink.events if e.rule == "nccl-timeout"]
    assert (event.labels["rank"], event.labels["host"]) == ("139", "node-017")
    replayed = replay([str(log)], BUILTIN, options=ReplayOptions()).events
    assert [e.labels for e in replayed if e.rule == "nccl-timeout"] == [event.labels]
