"""One alert per rank where a line's prefix names its rank (`logwatch/rules/writers.py`);
`run-crashed` names a global rank, or says `local rank N on HOST` (`logwatch/drivers/placing.py`);
`--gpus-per-node` turns a local rank on a numbered node into a global one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.alerts import AlertEvent
from logwatch.cli import cli
from logwatch.drivers.replay import ReplayOptions, replay
from logwatch.rules.loader import builtin_rules_dir, load_rules
from tests.support.paths import load_bench

BUILTIN = load_rules([builtin_rules_dir()])
gen = load_bench("gen_fleet")

TIMEOUT = (
    "[E1207 02:10:39.208820 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=88811, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600008 milliseconds before timing out."
)


def _events(path: Path, rule: str, **options: object) -> list[AlertEvent]:
    found = replay([str(path)], BUILTIN, options=ReplayOptions(**options)).events  # type: ignore[arg-type]
    return [event for event in found if event.rule == rule]


@pytest.mark.parametrize("layout", ["slurm-default", "slurm-label"])
def test_every_ranks_timeout_in_a_shared_file_is_its_own_alert(tmp_path: Path, layout: str) -> None:
    """A SLURM node file (`[defaultL]:`) or `srun -l`'s one file (`N: `): each rank that timed
    out has its alert, with its global rank (the culprit hangs: the 15 others time out)."""
    spec = gen.FleetSpec(ranks=16, steps=3, layout=layout, cause="xid79", mode="hangs")
    run = gen.generate(tmp_path / "run", spec)
    found = replay([str(p) for p in run.files], BUILTIN).events
    timeouts = [e for e in found if e.rule == "nccl-timeout"]
    ranks = sorted(int(e.labels["rank"]) for e in timeouts)
    assert ranks == [r for r in range(16) if r != run.culprit_rank]
    assert len({e.fingerprint for e in timeouts}) == 15


def test_a_file_without_rank_prefixes_still_alerts_once(tmp_path: Path) -> None:
    """Two timeouts in an unprefixed file are one alert, as before; two in a `[rank3]:` file
    too (one rank), and its identity is the rank replay already gave it."""
    plain = tmp_path / "plain.log"
    plain.write_text(TIMEOUT.format(rank=3) + "\n" + TIMEOUT.format(rank=3) + "\n")
    assert len(_events(plain, "nccl-timeout")) == 1
    ranked = tmp_path / "ranked.log"
    ranked.write_text("".join(f"[rank3]:{TIMEOUT.format(rank=3)}\n" for _ in range(2)))
    (event,) = _events(ranked, "nccl-timeout")
    assert dict(event.labels) == {"rank": "3"}


AGENT_FAILED = (
    "E1207 02:10:41.118000 3349 torch/distributed/elastic/multiprocessing/api.py:874] failed "
    "(exitcode: -6) local_rank: 0 (pid: 3412) of binary: /usr/bin/python3"
)
STEP = "2026-12-07 02:10:00,000 INFO train.py:212 step 7 loss 2.4990"


def test_run_crashed_says_local_rank_on_host_when_no_global_rank_is_known(
    tmp_path: Path,
) -> None:
    """torch elastic's `failed (exitcode: -6) local_rank: 0`: never `rank 0`; with the host
    the path names, `local rank 0 on node-017`; without one, `local rank 0`."""
    named = tmp_path / "slurm-4242-node-017.out"
    named.write_text(f"{STEP}\n{AGENT_FAILED}\n")
    (event,) = _events(named, "run-crashed")
    assert "local rank 0 on node-017 failed first with exit code -6" in event.summary
    assert event.labels["local_rank"] == "0" and "rank" not in event.labels
    bare = tmp_path / "agent.log"
    bare.write_text(f"{STEP}\n{AGENT_FAILED}\n")
    (event,) = _events(bare, "run-crashed")
    assert ": local rank 0 failed first with exit code -6" in event.summary


ROOT_CAUSE = [
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2026-12-07_02:10:41",
    "  host      : node-017",
    "  rank      : 136 (local_rank: 0)",
    "  exitcode  : -6 (pid: 3412)",
]


def test_run_crashed_names_the_global_rank_the_table_gives(tmp_path: Path) -> None:
    """The Root Cause table's `rank : 136 (local_rank: 0)` is a global rank: `rank 136 failed
    first`, and its line is not taken for the exception."""
    log = tmp_path / "agent.log"
    log.write_text("\n".join([STEP, *ROOT_CAUSE]) + "\n")
    (event,) = _events(log, "run-crashed")
    assert event.labels["rank"] == "136"
    assert "): rank 136 failed first" in event.summary
    assert "local_rank" not in event.summary


NODE_LINES = [
    "[default0]:node-017:41:41 [0] NCCL INFO comm 0x1 rank 136 nRanks 256 nNodes 32 localRanks 8",
    f"[default0]:{STEP}",
    "[default0]:Traceback (most recent call last):",
    '[default0]:  File "train.py", line 1, in <module>',
    "[default0]:RuntimeError: boom",
]


def test_run_crashed_names_the_global_rank_placement_finds(tmp_path: Path) -> None:
    """A `[default0]:` traceback in node-017's file: the NCCL line maps local rank 0 there to
    rank 136, so `rank 136 failed first`; without that line, `local rank 0 on node-017`."""
    log = tmp_path / "slurm-4242-node-017.out"
    log.write_text("\n".join(NODE_LINES) + "\n")
    (event,) = _events(log, "run-crashed")
    assert "rank 136 failed first with RuntimeError: boom" in event.summary
    assert (event.labels["rank"], event.labels["host"]) == ("136", "node-017")
    log.write_text("\n".join(NODE_LINES[1:]) + "\n")
    (event,) = _events(log, "run-crashed")
    assert "local rank 0 on node-017 failed first with RuntimeError: boom" in event.summary
    assert "rank" not in event.labels


def test_gpus_per_node_gives_a_numbered_nodes_local_ranks_their_global_rank(
    tmp_path: Path,
) -> None:
    """`replay --layout 'slurm-{*}-n{node}.out' --gpus-per-node 8`: node 2's `[default3]:` line
    is rank 19 (its host, n2, from the built-in `slurm-JOB-HOST.out` reading of the name the
    layout leaves it); without the option only `local_rank` 3, never a rank; `--gpus-per-node
    0` is refused in one line."""
    log = tmp_path / "slurm-4242-n2.out"
    log.write_text(f"[default3]:{TIMEOUT.format(rank=19)}\n")
    runner = CliRunner()
    args = ["replay", str(log), "--format", "jsonl", "--layout", "slurm-{*}-n{node}.out"]
    result = runner.invoke(cli, [*args, "--gpus-per-node", "8"])
    assert result.exit_code == 0, result.stderr
    (doc,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert doc["labels"] == {"rank": "19", "local_rank": "3", "host": "n2"}
    result = runner.invoke(cli, args)
    (doc,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert doc["labels"] == {"local_rank": "3", "host": "n2"}
    result = runner.invoke(cli, [*args, "--gpus-per-node", "0"])
    assert result.exit_code == 2
    assert "--gpus-per-node" in result.stderr and "Traceback" not in result.stderr
