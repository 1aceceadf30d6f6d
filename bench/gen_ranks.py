"""Generate a run's many small per-rank logs in torchrun's layout (deterministic: seeded).

Usage: python bench/gen_ranks.py OUT_DIR [--ranks 2048] [--mb 20] [--gpus-per-node 8]

Writes `OUT_DIR/node-NNN/attempt_0/L/{stdout,stderr}.log` for every local rank L of every node
(torchrun `--log-dir OUT_DIR/$HOST --redirects 3`), each node's launcher log
`node-NNN/torchrun.log`, and the job's `job.out`: for 2 048 ranks on 256 nodes, 4 353 files.
The bytes (about --mb MB in all) are the realistic DFlash mix of `gen_dflash.py` (step, queue,
data-loader, 8-GPU snapshot and warning lines, one run diverging into NaN), handed out to the
stdout logs in stretches; the stderr logs carry NCCL init lines and warnings, and the launcher
logs a few lines each. What matters for the benchmark is the shape: thousands of files of a few
kB (issue 36's fleet), where a replay pays each file's fixed cost.
"""

from __future__ import annotations

import argparse
import itertools
import random
from collections.abc import Iterator
from pathlib import Path

import gen_dflash

NCCL = [
    "{host}:{pid}:{pid} [{local}] NCCL INFO Bootstrap : Using eth0:10.1.{node}.{local}<0>",
    "{host}:{pid}:{pid} [{local}] NCCL INFO NET/IB : Using [0]mlx5_{local}:1/IB ; OOB eth0",
    "{host}:{pid}:{pid} [{local}] NCCL INFO comm 0x55d1 rank {rank} nranks {world} cudaDev "
    "{local} nvmlDev {local} busId {local}0000 commId 0x9f1 - Init COMPLETE",
    "[rank{rank}]:[W1107 02:41:{sec:02d}.{ms:03d}] Warning: grad clipping active: norm 12.4 > 1.0",
]
LAUNCHER = [
    "[2026-11-01 00:00:0{i},000] torch.distributed.run: [WARNING] Setting OMP_NUM_THREADS to 1",
    "[2026-11-01 00:00:0{i},100] torch.distributed.elastic.agent.server.api: [INFO] [default] "
    "Starting worker group on {host}",
    "[2026-11-01 00:00:0{i},200] torch.distributed.elastic.agent.server.api: [INFO] "
    "local_ranks=[0, 1, 2, 3, 4, 5, 6, 7] role_ranks={ranks}",
]


def dflash_lines(seed: int) -> Iterator[str]:
    """The realistic DFlash mix, line by line, without its `run start:` headers after the first
    (each rank's log is one run)."""
    rng = random.Random(seed)
    for chunk in gen_dflash.realistic(rng):
        yield from (line + "\n" for line in chunk.splitlines())


def write(out: Path, ranks: int, mb: float, gpus_per_node: int = 8, seed: int = 36) -> int:
    """Write the layout under `out`; the number of files written."""
    rng = random.Random(seed)
    nodes = (ranks + gpus_per_node - 1) // gpus_per_node
    # what the stdout logs share: about 85 % of the bytes (the stderr logs and launchers the rest)
    per_rank = int(mb * 1_000_000 * 0.85 / ranks)
    source = dflash_lines(seed)
    files = 0
    out.mkdir(parents=True, exist_ok=True)
    for node in range(nodes):
        host = f"node-{node:03d}"
        folder = out / host
        role = list(range(node * gpus_per_node, min((node + 1) * gpus_per_node, ranks)))
        for local, rank in enumerate(role):
            base = folder / "attempt_0" / str(local)
            base.mkdir(parents=True, exist_ok=True)
            chunk, size = [], 0
            for line in source:
                chunk.append(line)
                size += len(line)
                if size >= per_rank:
                    break
            (base / "stdout.log").write_text("".join(chunk))
            pid = 1000 + rank
            err = [
                NCCL[i % len(NCCL)].format(
                    host=host,
                    pid=pid,
                    local=local,
                    node=node,
                    rank=rank,
                    world=ranks,
                    sec=rng.randint(0, 59),
                    ms=rng.randint(0, 999),
                )
                for i in range(rng.randint(3, 8))
            ]
            (base / "stderr.log").write_text("\n".join(err) + "\n")
            files += 2
        launcher = [line.format(i=i, host=host, ranks=role) for i, line in enumerate(LAUNCHER)]
        (folder / "torchrun.log").write_text("\n".join(launcher) + "\n")
        files += 1
    head = itertools.islice(dflash_lines(seed + 1), 20)
    (out / "job.out").write_text("".join(head))
    return files + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--ranks", type=int, default=2048)
    parser.add_argument("--mb", type=float, default=20.0, help="about this many MB in all")
    parser.add_argument("--gpus-per-node", type=int, default=8)
    args = parser.parse_args()
    count = write(args.out, args.ranks, args.mb, args.gpus_per_node)
    print(f"{args.out}: {count} files")


if __name__ == "__main__":
    main()
