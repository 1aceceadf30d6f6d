"""A local rank's global rank from what the launcher said of its node (`logwatch/drivers/
noderank.py`): torch elastic's rendezvous result (`group_rank=`, `global_ranks=[...]`), the
environment (`NODE_RANK`, `LOCAL_WORLD_SIZE`), DeepSpeed's `global_rank_mapping`; never a
local rank called a rank when the node is not known for sure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.drivers.lineinfo import FACT_SCHEMA
from logwatch.drivers.noderank import mapped_hosts, node_globals
from logwatch.drivers.tail_place import LivePlacement

STEP = "2026-12-07 02:00:00,000 INFO train.py:212 step 7 loss 2.4990"
TIMEOUT = (
    "[E1207 02:10:39.208820 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=88811, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600008 milliseconds before timing out."
)
# torch/distributed/elastic/agent/server/api.py `_rendezvous`, as torchrun's console prints it
RENDEZVOUS = [
    "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for "
    "workers. Result:",
    "  restart_count=0",
    "  master_addr=node-000",
    "  master_port=29500",
    "  group_rank=17",
    "  group_world_size=32",
    "  local_ranks=[0, 1, 2, 3, 4, 5, 6, 7]",
    "  role_ranks=[136, 137, 138, 139, 140, 141, 142, 143]",
    "  global_ranks=[136, 137, 138, 139, 140, 141, 142, 143]",
    "  role_world_sizes=[256, 256, 256, 256, 256, 256, 256, 256]",
    "  global_world_sizes=[256, 256, 256, 256, 256, 256, 256, 256]",
]


def _labels(*args: str) -> list[dict[str, str]]:
    result = CliRunner().invoke(cli, ["replay", *args, "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    return [json.loads(line)["labels"] for line in result.stdout.splitlines()]


def test_the_rendezvous_result_gives_a_node_files_local_rank_its_global_rank(
    tmp_path: Path,
) -> None:
    """A SLURM node file with torch elastic's rendezvous result: `[default3]:`'s timeout is
    rank 139 of node-017; without the block, local rank 3 only."""
    log = tmp_path / "slurm-4242-node-017.out"
    log.write_text("\n".join([*RENDEZVOUS, f"[default3]:{TIMEOUT.format(rank=3)}"]) + "\n")
    assert _labels(str(log)) == [{"rank": "139", "local_rank": "3", "host": "node-017"}]
    log.write_text(f"[default3]:{TIMEOUT.format(rank=3)}\n")
    assert _labels(str(log)) == [{"local_rank": "3", "host": "node-017"}]


@pytest.mark.parametrize(
    ("lines", "options", "rank"),
    [
        (["NODE_RANK=2", "LOCAL_WORLD_SIZE=8"], [], "19"),
        (["export GROUP_RANK='2'", "  nproc_per_node   : 8"], [], "19"),
        (["  group_rank=2"], ["--gpus-per-node", "8"], "19"),
        (["nnodes=4, num_local_procs=8, node_rank=2"], [], "19"),  # DeepSpeed's launcher
        (["NODE_RANK=2"], [], None),  # no local world size: not known
        (["  group_rank=2", "  group_rank=3", "LOCAL_WORLD_SIZE=8"], [], None),  # two nodes
        (["SLURM_NODE_RANK=2", "LOCAL_WORLD_SIZE=8"], [], None),  # not NODE_RANK itself
    ],
)
def test_group_rank_and_local_world_size_give_the_global_rank(
    tmp_path: Path, lines: list[str], options: list[str], rank: str | None
) -> None:
    """`group rank x local world size + local rank` where both are said (once each), or with
    `--gpus-per-node`; no `rank` label otherwise."""
    log = tmp_path / "node.log"
    log.write_text("\n".join([*lines, f"[default3]:{TIMEOUT.format(rank=3)}"]) + "\n")
    [labels] = _labels(str(log), *options)
    assert labels.get("rank") == rank and labels["local_rank"] == "3"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_agents_log_beside_torchruns_rank_files_gives_them_global_ranks(
    tmp_path: Path, jobs: str
) -> None:
    """`HOST/agent.log` (the rendezvous result) beside torchrun's `HOST/RUN/attempt_0/L/
    stderr.log`: each rank file's timeout has its global rank, in one process or on two."""
    for host, node in (("node-016", 16), ("node-017", 17)):
        ranks = ", ".join(str(node * 8 + local) for local in range(8))
        lines = [RENDEZVOUS[0], f"  group_rank={node}", f"  global_ranks=[{ranks}]"]
        (tmp_path / host).mkdir()
        (tmp_path / host / "agent.log").write_text("\n".join(lines) + "\n")
        for local in (2, 3):
            folder = tmp_path / host / "run1" / "attempt_0" / str(local)
            folder.mkdir(parents=True)
            (folder / "stderr.log").write_text(TIMEOUT.format(rank=local) + "\n")
    found = _labels(str(tmp_path), "--jobs", jobs)
    assert sorted((d["host"], d["local_rank"], d["rank"]) for d in found) == [
        ("node-016", "2", "130"),
        ("node-016", "3", "131"),
        ("node-017", "2", "138"),
        ("node-017", "3", "139"),
    ]


def test_deepspeeds_rank_mapping_names_each_ranks_host(tmp_path: Path) -> None:
    """DeepSpeed's `global_rank_mapping` in the launcher's log: the per-rank file
    `..._rank9.log` (a global rank) gets its host, node-b."""
    launcher = tmp_path / "launcher.log"
    launcher.write_text(
        "node-a: [2024-10-01 01:00:00,000] [INFO] [launch.py:163:main] global_rank_mapping="
        "defaultdict(<class 'list'>, {'node-a': [0, 1, 2, 3, 4, 5, 6, 7], "
        "'node-b': [8, 9, 10, 11, 12, 13, 14, 15]})\n"
    )
    rank_log = tmp_path / "20241001010000_rank9.log"
    rank_log.write_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    found = _labels(str(launcher), str(rank_log))
    assert {(d.get("rank"), d.get("host")) for d in found} == {("9", "node-b")}


def test_the_node_forms_read_as_documented() -> None:
    """DeepSpeed's map and a node's ranks: a list wins, else group rank x size; two values
    of one say nothing."""
    text = "defaultdict(<class 'list'>, {'a': [0, 1], 'b-2.x': [2, 3]})"
    assert mapped_hosts(text) == {"a": (0, 1), "b-2.x": (2, 3)}
    assert node_globals([1], [4], [None], None) == (4, 5, 6, 7)
    assert node_globals([1], [None], ["9, 8"], None) == (9, 8)
    assert node_globals([1, 2], [4], [None], None) is None
    assert node_globals([0], [None], [None], 2) == (0, 1)
    assert node_globals([None], [4], [None], None) is None


def test_a_checkpoint_of_an_older_logwatch_keeps_its_facts() -> None:
    """The live placement's checkpoint rows from before the node columns (12 values) are read,
    the new columns null; a row of another length is refused as a ValueError."""
    old = ["slurm-1-n1.out", None, 3, None, "n1", 3, 139, 256, None, None, None, None]
    assert len(old) == len(FACT_SCHEMA) - 5
    placement = LivePlacement(followed=lambda: [("slurm-1-n1.out", True)])
    placement.import_state({"sources": {"slurm-1-n1.out": {"facts": [old]}}})
    assert placement.export_state()["sources"]["slurm-1-n1.out"]["facts"] == [
        [*old, None, None, None, None, None]
    ]
    with pytest.raises(ValueError, match="placement"):
        placement.import_state({"sources": {"x": {"facts": [[*old, *[None] * 5, 1, 2]]}}})


def test_a_paths_node_index_survives_the_trip_to_a_worker_process() -> None:
    """A `{node}` read from a path travels with the identity (`--jobs` workers pickle it)."""
    import pickle

    from logwatch.drivers.layout import PathIdentity

    assert pickle.loads(pickle.dumps(PathIdentity(host="n2", local=3, node=2))).node == 2


def test_the_verdict_names_the_global_rank_the_rendezvous_lines_give(tmp_path: Path) -> None:
    """Two SLURM node files whose only rank facts are the rendezvous results: the culprit's
    `[default1]:` CUDA error on node-001 is rank 3's, the verdict's first line says so (main
    gave no verdict: no rank was known)."""
    for node in range(2):
        lines = [
            RENDEZVOUS[0],
            f"  group_rank={node}",
            f"  global_ranks=[{2 * node}, {2 * node + 1}]",
        ]
        lines += [f"[default{local}]:{STEP}" for local in range(2)]
        if node == 1:
            lines.append("[default1]:2026-12-07 02:00:30,000 INFO train.py:212 step 8 loss 2.1")
            lines.append(
                "[default1]:RuntimeError: CUDA error: an illegal memory access was encountered"
            )
        lines += [
            f"[default{local}]:{TIMEOUT.format(rank=2 * node + local)}"
            for local in range(2)
            if (node, local) != (1, 1)
        ]
        (tmp_path / f"slurm-77-node-00{node}.out").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(cli, ["replay", str(tmp_path)])
    first = result.stdout.splitlines()[0]
    assert "root-cause" in first and "rank 3 (node-001): CUDA error" in first, result.stdout
    assert "3 of 4 ranks then timed out" in first


def test_a_world_size_line_does_not_override_the_nccl_lines_world(tmp_path: Path) -> None:
    """`WORLD_SIZE=4096` printed by a script beside an NCCL `comm ... rank 139 nRanks 256` line:
    the NCCL line's world decides that its rank is global, `[default3]:` is rank 139."""
    log = tmp_path / "slurm-4242-node-017.out"
    nccl = "[default3]:node-017:41:41 [3] NCCL INFO comm 0x1 rank 139 nRanks 256 nNodes 32"
    log.write_text(f"WORLD_SIZE=4096\n{nccl}\n[default3]:{TIMEOUT.format(rank=3)}\n")
    assert _labels(str(log)) == [{"rank": "139", "local_rank": "3", "host": "node-017"}]
