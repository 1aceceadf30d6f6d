"""A seeded failed fleet run on disk: one rank's GPU or process fails, every other rank then
times out in the same NCCL collective (the watchdog cascade), as logwatch's fleet post-mortem
must read it.

Layouts: torchrun `--log-dir /logs/$HOST --redirects 3` (`HOST/RUN_ID/attempt_0/L/{stdout,
stderr}.log` per rank, a `kern.log` per host), SLURM with `--tee 3` (`slurm-JOB-HOST.out` per
node, `[defaultL]:` prefixes, the agent's own lines unprefixed) and SLURM `srun -l` (one
`slurm-JOB.out`, `N: ` task prefixes). Causes: Xid 79, ECC, illegal address, CUDA OOM, NaN loss;
the culprit exits (its traceback, then its node-mates are stopped) or hangs; or it is silent
(prints nothing, no dmesg). Line forms of torch 2.5 (`[PG ID 0 PG GUID 0(default_pg) Rank R]`,
`[rankR]:` on tracebacks) or torch 2.3 (`[PG 0 (default_pg) Rank R]`, bare tracebacks); one
host's clock may be skewed. The line forms are those of the public threads in
/work/shared/research/fleet.md (tests/data/fleet_lines.toml quotes them).

    python bench/gen_fleet.py OUT --ranks 256 --layout torchrun --cause xid79 --mode hangs
"""

from __future__ import annotations

import argparse
import os
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

LAYOUTS = ("torchrun", "slurm-default", "slurm-label")
CAUSES = ("xid79", "ecc", "illegal-address", "oom", "nan")
MODES = ("exits", "hangs", "silent")
TORCH = ("2.5", "2.3")
EXPECTED_CAUSE = {
    "xid79": "gpu-lost",
    "ecc": "cuda-error",
    "illegal-address": "cuda-error",
    "oom": "cuda-oom",
    "nan": "nan-loss",
}
"""The `root-cause` event's `cause` label for each generated cause (the primary's rule id)."""

START = datetime(2026, 12, 7, 2, 0, 0)
SEQ = 88811
TIMEOUT_MS = 600_000


@dataclass(frozen=True, slots=True)
class FleetSpec:
    """What to generate."""

    ranks: int = 16
    gpus_per_node: int = 8
    layout: str = "torchrun"
    cause: str = "xid79"
    mode: str = "hangs"
    torch: str = "2.5"
    skew_s: float = 0.0  # the clock of one host (not the culprit's) is this far ahead (+) or behind
    skew_culprit: bool = False  # skew the culprit's own host instead
    steps: int = 40  # training steps before the failure
    step_s: float = 2.0
    lines_per_step: int = 1  # each rank's stdout lines per step (0: only rank 0 logs steps)
    seed: int = 0


@dataclass(frozen=True, slots=True)
class FleetRun:
    """What was generated: where, and the truth a post-mortem must find."""

    root: Path
    culprit_rank: int
    culprit_host: str
    world: int
    hosts: int
    expected_cause: str  # "none" when the culprit was silent
    files: list[Path] = field(default_factory=list)


def host_name(node: int) -> str:
    return f"node-{node:03d}"


def glog(ts: datetime, level: str = "E") -> str:
    """`E1207 03:00:13.460801783`: glog's yearless time, nanoseconds."""
    return f"{level}{ts:%m%d %H:%M:%S}.{ts.microsecond:06d}{ts.microsecond % 997:03d}"


def iso(ts: datetime) -> str:
    return f"{ts:%Y-%m-%d %H:%M:%S},{ts.microsecond // 1000:03d}"


class _Writer:
    """Lines per rank, and per host for the agent and the kernel, before the layout places them."""

    def __init__(self, spec: FleetSpec) -> None:
        self.spec = spec
        self.out: dict[int, list[tuple[datetime, str, str]]] = {}  # rank: (ts, stream, line)
        self.agent: dict[int, list[tuple[datetime, str]]] = {}  # node: lines
        self.kernel: dict[int, list[tuple[datetime, str]]] = {}

    def rank(self, rank: int, ts: datetime, line: str, stream: str = "stderr") -> None:
        self.out.setdefault(rank, []).append((ts, stream, line))


def _pg(spec: FleetSpec, rank: int) -> str:
    if spec.torch == "2.5":
        return f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    return f"[PG 0 (default_pg) Rank {rank}]"


def _tb_prefix(spec: FleetSpec, rank: int) -> str:
    return f"[rank{rank}]: " if spec.torch == "2.5" else ""


def _init_lines(w: _Writer, rank: int, host: str, local: int, ts: datetime) -> None:
    spec = w.spec
    pid = 40000 + rank
    bus = 0x1B + 0x20 * local
    head = f"{host}:{pid}:{pid} [{local}] NCCL INFO"
    w.rank(rank, ts, f"{head} NCCL version 2.21.5+cuda12.4")
    nodes = spec.ranks // spec.gpus_per_node
    w.rank(
        rank,
        ts,
        f"{head} comm 0x{0x55D0C8A0 + rank:x} rank {rank} nRanks {spec.ranks} nNodes {nodes} "
        f"localRanks {spec.gpus_per_node} localRank {local} MNNVL 0",
    )
    w.rank(
        rank,
        ts + timedelta(milliseconds=40),
        f"{head} ncclCommInitRank comm 0x{0x55D0C8A0 + rank:x} rank {rank} nranks {spec.ranks} "
        f"cudaDev {local} nvmlDev {local} busId {bus:x}000 commId 0x5f1c2a - Init COMPLETE",
    )


def _step_line(step: int, ts: datetime, loss: float | str) -> str:
    value = loss if isinstance(loss, str) else f"{loss:.4f}"
    return (
        f"{iso(ts)} INFO train.py:212 step {step} loss {value} grad_norm 0.8731 lr 3.0e-04 "
        f"tokens/s 12345"
    )


def _traceback(w: _Writer, rank: int, ts: datetime, error: str) -> None:
    p = _tb_prefix(w.spec, rank)
    for line in (
        "Traceback (most recent call last):",
        '  File "/workspace/train.py", line 288, in <module>',
        "    main()",
        '  File "/workspace/train.py", line 212, in train_step',
        "    loss.backward()",
        error,
    ):
        w.rank(rank, ts, p + line)


def _primary(w: _Writer, rank: int, host_node: int, local: int, ts: datetime, step: int) -> None:
    """The culprit's own failure lines (and its host's kernel line for an Xid)."""
    spec = w.spec
    pg = _pg(spec, rank)
    g = glog(ts)
    exits = spec.mode == "exits"
    if spec.cause == "xid79":
        bus = 0x1B + 0x20 * local
        w.kernel.setdefault(host_node, []).append(
            (
                ts,
                f"NVRM: Xid (PCI:0000:{bus:02x}:00): 79, pid={40000 + rank}, name=python, "
                "GPU has fallen off the bus.",
            )
        )
        if exits:
            later = ts + timedelta(seconds=1)
            w.rank(
                rank,
                later,
                f"[rank{rank}]:[{glog(later)} ProcessGroupNCCL.cpp:1595] {pg} Process group "
                "watchdog thread terminated with exception: CUDA error: unspecified launch failure",
            )
    elif spec.cause == "ecc":
        _traceback(w, rank, ts, "RuntimeError: CUDA error: uncorrectable ECC error encountered")
        w.rank(rank, ts, f"[rank{rank}]:[{g} CUDACachingAllocator.cpp:1098] ECC error on GPU")
    elif spec.cause == "illegal-address":
        w.rank(
            rank,
            ts,
            f"[rank{rank}]:[{g} ProcessGroupNCCL.cpp:1595] {pg} Process group watchdog thread "
            "terminated with exception: CUDA error: an illegal memory access was encountered",
        )
    elif spec.cause == "oom":
        w.rank(rank, ts, _step_line(step, ts - timedelta(seconds=1), 2.31), "stdout")
        _traceback(
            w,
            rank,
            ts,
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU "
            f"{local} has a total capacity of 79.11 GiB of which 1.23 GiB is free.",
        )
    elif spec.cause == "nan":
        w.rank(rank, ts, _step_line(step, ts, "nan"), "stdout")
        if exits:
            _traceback(w, rank, ts, f"FloatingPointError: loss is nan at step {step}")


def _victim(w: _Writer, rank: int, ts: datetime) -> None:
    """The watchdog cascade of a rank that waited on the culprit."""
    spec = w.spec
    pg = _pg(spec, rank)
    ran = TIMEOUT_MS + int((ts.microsecond // 1000) % 50)
    work = (
        f"WorkNCCL(SeqNum={SEQ}, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
        f"Timeout(ms)={TIMEOUT_MS}) ran for {ran} milliseconds before timing out."
    )
    g = glog(ts)
    r = f"[rank{rank}]:"
    w.rank(
        rank,
        ts,
        f"{r}[{g} ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation "
        f"timeout: {work}",
    )
    w.rank(
        rank,
        ts,
        f"{r}[{g} ProcessGroupNCCL.cpp:1785] {pg} Timeout at NCCL work: {SEQ}, last enqueued "
        f"NCCL work: {SEQ}, last completed NCCL work: {SEQ - 1}.",
    )
    w.rank(
        rank,
        ts,
        f"{r}[{g} ProcessGroupNCCL.cpp:630] [Rank {rank}] Some NCCL operations have failed or "
        "timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations "
        "might run on corrupted/incomplete data.",
    )
    w.rank(
        rank,
        ts,
        f"{r}[{g} ProcessGroupNCCL.cpp:636] [Rank {rank}] To avoid data inconsistency, we are "
        "taking the entire process down.",
    )
    w.rank(
        rank,
        ts,
        f"{r}[{g} ProcessGroupNCCL.cpp:1595] {pg} Process group watchdog thread terminated with "
        f"exception: [Rank {rank}] Watchdog caught collective operation timeout: {work}",
    )
    w.rank(
        rank,
        ts,
        f"{r}[{glog(ts, 'F')} ProcessGroupNCCL.cpp:1413] {pg} Terminating the process after "
        "attempting to dump debug info, due to collective timeout or exception.",
    )


def _lines(spec: FleetSpec) -> tuple[_Writer, int, dict[int, float]]:
    rng = random.Random(spec.seed)
    nodes = spec.ranks // spec.gpus_per_node
    culprit = rng.randrange(spec.ranks)
    culprit_node = culprit // spec.gpus_per_node
    skew: dict[int, float] = {}
    if spec.skew_s:
        others = [n for n in range(nodes) if n != culprit_node]
        skewed = culprit_node if spec.skew_culprit or not others else rng.choice(others)
        skew[skewed] = spec.skew_s
    w = _Writer(spec)
    fail_at = START + timedelta(seconds=30 + spec.steps * spec.step_s + rng.uniform(0.2, 0.8))
    timeout_at = fail_at + timedelta(milliseconds=TIMEOUT_MS)
    for rank in range(spec.ranks):
        node, local = divmod(rank, spec.gpus_per_node)
        host = host_name(node)
        _init_lines(w, rank, host, local, START + timedelta(seconds=rng.uniform(1, 5)))
        logs = spec.lines_per_step > 0 or rank == 0
        last_step = spec.steps if rank != culprit else spec.steps - 1
        for step in range(1, last_step + 1):
            ts = START + timedelta(seconds=30 + step * spec.step_s, milliseconds=rng.randint(0, 90))
            for _ in range(max(spec.lines_per_step, 1) if logs else 0):
                w.rank(rank, ts, _step_line(step, ts, 2.5 - step * 0.001), "stdout")
    if spec.mode != "silent":
        _primary(w, culprit, culprit_node, culprit % spec.gpus_per_node, fail_at, spec.steps)
    mates = range(culprit_node * spec.gpus_per_node, (culprit_node + 1) * spec.gpus_per_node)
    for rank in range(spec.ranks):
        if rank == culprit or (spec.mode == "exits" and rank in mates):
            continue  # an exiting culprit's node-mates are stopped by its agent: no timeout
        _victim(w, rank, timeout_at + timedelta(seconds=rng.uniform(0.0, 28.0)))
    if spec.mode == "exits":
        stop = fail_at + timedelta(seconds=2)
        lines = [(stop, f"Sending process {50000 + r} closing signal SIGTERM") for r in mates]
        lines += _child_failed(spec, culprit, stop)
        w.agent[culprit_node] = lines
    return w, culprit, skew


def _child_failed(spec: FleetSpec, culprit: int, ts: datetime) -> list[tuple[datetime, str]]:
    """torchrun's per-node ChildFailedError table (the agent's clock, one-second resolution)."""
    local = culprit % spec.gpus_per_node
    node = culprit // spec.gpus_per_node
    stamp = f"{ts:%Y-%m-%d_%H:%M:%S}"
    lines = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "=" * 60,
        "train.py FAILED",
        "-" * 60,
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "-" * 60,
        "Root Cause (first observed failure):",
        "[0]:",
        f"  time      : {stamp}",
        f"  host      : {host_name(node)}",
        f"  rank      : {culprit} (local_rank: {local})",
        f"  exitcode  : 1 (pid: {40000 + culprit})",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "=" * 60,
    ]
    return [(ts, line) for line in lines]


def generate(out: Path, spec: FleetSpec) -> FleetRun:
    """Write the run under `out` (created) and say where the culprit is."""
    w, culprit, skew = _lines(spec)
    out.mkdir(parents=True, exist_ok=True)
    nodes = spec.ranks // spec.gpus_per_node
    files: list[Path] = []

    def shifted(node: int, ts: datetime, line: str) -> tuple[datetime, str]:
        offset = skew.get(node, 0.0)
        if not offset:
            return ts, line
        moved = ts + timedelta(seconds=offset)
        return moved, _retime(line, ts, moved)

    writers = {"torchrun": _torchrun, "slurm-default": _slurm_default, "slurm-label": _slurm_label}
    files = writers[spec.layout](out, spec, w, nodes, shifted)
    stamp = (START + timedelta(hours=1)).timestamp()
    for path in files:
        os.utime(path, (stamp, stamp))  # glog times have no year: the mtime's
    expected = "none" if spec.mode == "silent" else EXPECTED_CAUSE[spec.cause]
    host = host_name(culprit // spec.gpus_per_node)
    return FleetRun(out, culprit, host, spec.ranks, nodes, expected, files)


def _retime(line: str, old: datetime, new: datetime) -> str:
    """The same line as written by a clock at `new` (each time form the generator writes)."""
    for form in (iso, glog, lambda t: glog(t, "F"), lambda t: f"{t:%Y-%m-%d_%H:%M:%S}"):
        line = line.replace(form(old), form(new))
    return line


def _kernel_lines(w: _Writer, node: int, shifted: object) -> list[str]:
    host = host_name(node)
    boot = START - timedelta(hours=3)
    lines = [(boot, "Linux version 6.8.0-45-generic (buildd@lcy02-amd64-115)")]
    lines.append((boot, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07"))
    lines += w.kernel.get(node, [])
    out = []
    for ts, text in lines:
        moved, _ = shifted(node, ts, "")  # type: ignore[operator]
        out.append(f"{moved:%Y-%m-%dT%H:%M:%S}.{moved.microsecond:06d}+00:00 {host} kernel: {text}")
    return out


def _rank_lines(w: _Writer, rank: int, node: int, shifted: object, stream: str | None) -> list[str]:
    out = []
    for ts, s, line in sorted(w.out.get(rank, []), key=lambda x: x[0]):
        if stream is None or s == stream:
            out.append(shifted(node, ts, line)[1])  # type: ignore[operator]
    return out


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _torchrun(out: Path, spec: FleetSpec, w: _Writer, nodes: int, shifted: object) -> list[Path]:
    files = []
    for node in range(nodes):
        host = host_name(node)
        run = out / host / f"f00d-run_{node * 7919 % 1000:03d}x"
        for local in range(spec.gpus_per_node):
            rank = node * spec.gpus_per_node + local
            folder = run / "attempt_0" / str(local)
            for stream in ("stdout", "stderr"):
                lines = _rank_lines(w, rank, node, shifted, stream)
                files.append(_write(folder / f"{stream}.log", lines))
        files.append(_write(out / host / "kern.log", _kernel_lines(w, node, shifted)))
    return files


def _agent(w: _Writer, node: int, shifted: object) -> list[tuple[datetime, str]]:
    return [shifted(node, ts, line) for ts, line in w.agent.get(node, [])]  # type: ignore[operator]


def _slurm_default(
    out: Path, spec: FleetSpec, w: _Writer, nodes: int, shifted: object
) -> list[Path]:
    files = []
    for node in range(nodes):
        rows: list[tuple[datetime, str]] = []
        for local in range(spec.gpus_per_node):
            rank = node * spec.gpus_per_node + local
            for ts, _, line in w.out.get(rank, []):
                moved, text = shifted(node, ts, line)  # type: ignore[operator]
                rows.append((moved, f"[default{local}]:{text}"))
        rows += _agent(w, node, shifted)
        rows.sort(key=lambda r: r[0])
        files.append(_write(out / f"slurm-4242-{host_name(node)}.out", [t for _, t in rows]))
        files.append(
            _write(out / "dmesg" / f"{host_name(node)}.log", _kernel_lines(w, node, shifted))
        )
    return files


def _slurm_label(out: Path, spec: FleetSpec, w: _Writer, nodes: int, shifted: object) -> list[Path]:
    rows: list[tuple[datetime, str]] = []
    for rank in range(spec.ranks):
        node = rank // spec.gpus_per_node
        for ts, _, line in w.out.get(rank, []):
            moved, text = shifted(node, ts, line)  # type: ignore[operator]
            rows.append((moved, f"{rank}: {text}"))
    rows.sort(key=lambda r: r[0])
    files = [_write(out / "slurm-4242.out", [t for _, t in rows])]
    for node in range(nodes):
        files.append(
            _write(out / "dmesg" / f"{host_name(node)}.log", _kernel_lines(w, node, shifted))
        )
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--layout", choices=LAYOUTS, default="torchrun")
    parser.add_argument("--cause", choices=CAUSES, default="xid79")
    parser.add_argument("--mode", choices=MODES, default="hangs")
    parser.add_argument("--torch", choices=TORCH, default="2.5")
    parser.add_argument("--skew", type=float, default=0.0)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--lines-per-step", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    spec = FleetSpec(
        ranks=args.ranks,
        gpus_per_node=args.gpus_per_node,
        layout=args.layout,
        cause=args.cause,
        mode=args.mode,
        torch=args.torch,
        skew_s=args.skew,
        steps=args.steps,
        lines_per_step=args.lines_per_step,
        seed=args.seed,
    )
    run = generate(args.out, spec)
    print(
        f"{len(run.files)} files under {run.root}: culprit rank {run.culprit_rank} on "
        f"{run.culprit_host}, cause {run.expected_cause}"
    )


if __name__ == "__main__":
    main()
