"""`replay --jobs 2` against `--jobs 1`, and `--dask` on a local 2-worker cluster against
`--jobs 2`, on one generated 256-rank run (every rank logging), in one run of this script.

    python bench/bench_jobs.py --steps 400 --lines-per-step 6 --runs 2

Each command is a subprocess writing JSONL to a file; the runs alternate (jobs 1, jobs 2,
dask, jobs 1, ...) so that a load change on a shared machine hits each alike; the best wall time
of each counts; the outputs must be byte-identical. The cluster (`dask scheduler` and two
`dask worker --nthreads 1`, POLARS_MAX_THREADS=1) is started before the timed runs and is not
timed; the client's connection and checks are.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _gen() -> object:
    spec = importlib.util.spec_from_file_location("gen_fleet", ROOT / "bench" / "gen_fleet.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_fleet"] = module
    spec.loader.exec_module(module)
    return module


def start_cluster(folder: Path) -> tuple[str, list[subprocess.Popen[bytes]]]:
    """A scheduler and two one-thread workers on 127.0.0.1; the scheduler file."""
    sched_file = folder / "scheduler.json"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0"]
    scheduler += ["--no-dashboard", "--scheduler-file", str(sched_file)]
    procs = [subprocess.Popen(scheduler, **quiet)]  # type: ignore[call-overload]
    while not sched_file.exists():
        time.sleep(0.2)
    env = {**os.environ, "POLARS_MAX_THREADS": "1"}
    for _ in range(2):
        worker = [str(BIN / "dask"), "worker", "--scheduler-file", str(sched_file)]
        worker += ["--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"]
        procs.append(subprocess.Popen(worker, env=env, **quiet))  # type: ignore[call-overload]
    import distributed

    with distributed.Client(scheduler_file=str(sched_file), timeout="120s") as client:
        client.wait_for_workers(2, timeout=180)
    return str(sched_file), procs


def timed(args: list[str], out: Path) -> tuple[float, float]:
    """Wall and CPU seconds (the command and its processes; a Dask worker's are not counted)
    of `python -m logwatch replay --format jsonl ARGS > out`."""
    command = [sys.executable, "-m", "logwatch", "replay", "--format", "jsonl", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with out.open("wb") as sink:
        subprocess.run(command, stdout=sink, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu


def main() -> None:
    """Generate the run, start the cluster, time the three ways, print a Markdown table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--lines-per-step", type=int, default=6)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--run-dir", type=Path, default=None, help="reuse a generated run")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-jobs-"))
    gen = _gen()
    root = opts.run_dir or work / "run"
    if opts.run_dir is None:
        spec = gen.FleetSpec(  # type: ignore[attr-defined]
            ranks=opts.ranks, steps=opts.steps, lines_per_step=opts.lines_per_step
        )
        gen.generate(root, spec)  # type: ignore[attr-defined]
    files = [p for p in root.rglob("*") if p.is_file()]
    size_mb = sum(p.stat().st_size for p in files) / 1e6
    sched_file, procs = start_cluster(work)
    ways = {
        "--jobs 1": ["--jobs", "1"],
        "--jobs 2": ["--jobs", "2"],
        "--dask (2 workers)": ["--dask", sched_file],
    }
    best: dict[str, float] = {}
    cpu_of: dict[str, float] = {}
    digests: dict[str, str] = {}
    try:
        for _ in range(opts.runs):
            for name, args in ways.items():
                out = work / "out.jsonl"
                wall, cpu = timed([*args, str(root)], out)
                if wall < best.get(name, float("inf")):
                    best[name], cpu_of[name] = wall, cpu
                digests[name] = hashlib.sha256(out.read_bytes()).hexdigest()
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            proc.wait(timeout=60)
    print(f"{opts.ranks} ranks, {len(files)} files, {size_mb:.0f} MB; best of {opts.runs}")
    print("| how | wall s | CPU s (client side) | vs --jobs 1 | vs --jobs 2 |")
    print("|---|---:|---:|---:|---:|")
    for name, wall in best.items():
        print(
            f"| {name} | {wall:.2f} | {cpu_of[name]:.2f} | {best['--jobs 1'] / wall:.2f}x "
            f"faster | {wall / best['--jobs 2']:.2f}x the time |"
        )
    same = len(set(digests.values())) == 1
    print(f"outputs byte-identical: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
