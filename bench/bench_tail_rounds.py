"""What a live round costs in-process, stage by stage: `tail`'s round thread at FILESxLINES.

Usage: PYTHONPATH=TREE python bench/bench_tail_rounds.py [--load 8x10 --load 200x1 ...]
                                                          [--rounds 30] [--warm 5] [--repeat 1]

For each load FILESxLINES, that many files are made with a run's first lines and followed by a
`TailDriver` (built-in rules, from their end, a state directory, no watcher, a fake clock that
moves 1 s per round: a wall-clock tick and a due checkpoint every round, as `tail` does each
second under a steady load). Each round appends LINES realistic DFlash lines (`bench_tail_cpu`'s
pool) to every file, then `poll_once` runs the round and its checkpoint. After --warm rounds,
the CPU time of the round thread (`time.thread_time`) and of the whole process
(`time.process_time`: polars' pool too) is summed over --rounds rounds, and the thread time of
each stage (the shared parse, `Engine.process_many`, the per-source `Engine.process` turns,
the plugins' `observe`, the wall-clock tick, the checkpoint). The writes are outside the timed
part. The tree is the one `logwatch` imports (PYTHONPATH): run two trees one after the other
with --repeat to interleave them (`--baseline TREE` does that in subprocesses).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_tail_cpu

STAGES = ("_parsed", "_evaluated", "_observe", "_tick", "_checkpoint")


def _timed(totals: dict[str, float], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[name] += time.thread_time() - start

    return wrapper


def measure(files: int, lines: int, rounds: int, warm: int, pool_log: Path) -> dict[str, float]:
    """Round thread and process CPU ms per round, and each stage's thread ms per round."""
    from logwatch.api import load_rules
    from logwatch.drivers.tail import TailDriver
    from logwatch.drivers.tail_options import StartMode, TailOptions
    from logwatch.engine import Engine
    from logwatch.testing import FakeClock

    pool = pool_log.read_text().splitlines(keepends=True)
    with tempfile.TemporaryDirectory(prefix="bench_tail_rounds.") as tmp:
        folder = Path(tmp)
        paths = [folder / f"rank{i:03d}.log" for i in range(files)]
        for path in paths:
            path.write_text("".join(pool[:3]))
        clock = FakeClock()
        engine = Engine(load_rules())
        driver = TailDriver(
            [str(folder / "*.log")],
            engine,
            _NullSink(),
            clock=clock,
            state_dir=folder / "state",
            options=TailOptions(start=StartMode.END),
            watcher_factory=None,
        )
        totals: dict[str, float] = defaultdict(float)
        for stage in STAGES:
            setattr(driver, stage, _timed(totals, stage, getattr(driver, stage)))
        engine.process = _timed(totals, "process", engine.process)  # type: ignore[method-assign]
        stride = len(pool) // files
        fds = [os.open(p, os.O_WRONLY | os.O_APPEND) for p in paths]
        thread = process = 0.0
        try:
            driver.open()
            for n in range(warm + rounds):
                for i, fd in enumerate(fds):
                    start = (i * stride + n * lines) % (len(pool) - lines)
                    os.write(fd, "".join(pool[start : start + lines]).encode())
                clock.advance(1.0)
                if n == warm:
                    totals.clear()
                t0, p0 = time.thread_time(), time.process_time()
                driver.poll_once()
                if n >= warm:
                    thread += time.thread_time() - t0
                    process += time.process_time() - p0
        finally:
            driver.close()
            for fd in fds:
                os.close(fd)
    out = {"thread_ms": 1e3 * thread / rounds, "process_ms": 1e3 * process / rounds}
    out.update({name.strip("_"): 1e3 * s / rounds for name, s in totals.items()})
    return out


class _NullSink:
    def emit(self, event: Any) -> None:
        pass

    def tick(self, now: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def rename_source(self, old: str, new: str) -> None:
        pass


def main() -> None:
    """Measure each load (per tree, interleaved with --baseline) and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=bench_tail_cpu.load, action="append")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--baseline", help="another tree, run in turn by PYTHONPATH")
    parser.add_argument("--pool", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    loads = args.load or [(8, 10.0), (200, 1.0)]
    with tempfile.TemporaryDirectory(prefix="bench_tail_rounds_pool.") as tmp:
        pool_log = args.pool or bench_tail_cpu.pool(Path(tmp))
        if args.json:
            for files, rate in loads:
                r = measure(files, int(rate), args.rounds, args.warm, pool_log)
                print(json.dumps({"load": f"{files}x{rate:g}", **r}), flush=True)
            return
        here = str(Path(__file__).resolve().parents[1])
        trees = [("base", args.baseline), ("this", here)] if args.baseline else [("this", here)]
        print(f"load avg {os.getloadavg()[0]:.1f}; {args.rounds} rounds after {args.warm}")
        for rep in range(args.repeat):
            for name, tree in trees:
                cmd = [sys.executable, __file__, "--json", "--pool", str(pool_log)]
                cmd += ["--rounds", str(args.rounds), "--warm", str(args.warm)]
                cmd += [a for files, rate in loads for a in ("--load", f"{files}x{rate:g}")]
                env = {**os.environ, "PYTHONPATH": tree}
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                for line in out.stdout.splitlines():
                    r = json.loads(line)
                    stages = " ".join(f"{k} {v:.1f}" for k, v in r.items() if k not in ("load",))
                    print(f"{rep} {name:4} {r['load']:>6}: {stages}", flush=True)


if __name__ == "__main__":
    main()
