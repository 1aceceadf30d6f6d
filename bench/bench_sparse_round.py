"""CPU of one one-line `tail` round, in process: the cost a sparse append pays, without the
watcher, the scheduler or the load (which drown `bench_tail.py --only sparse`'s latencies).

Usage: python bench/bench_sparse_round.py [--rounds 200] [--runs 3] [--files 50]
                                          [--baseline TREE]...

A TailDriver (built-in rules plus `bench_tail.py`'s probe rule, no watcher, no state) follows
`--files` files; each round appends an ordinary DFlash step line to one of them and runs
`poll_once` (its resolution), then appends a NaN line and times that `poll_once` alone
(`time.process_time()`: every thread, polars' pool included; and wall). Two kinds of NaN line,
as `bench_tail.py`'s sparse part writes them: the DFlash step line (a line shape), and the same
line with a probe suffix that no shape fits (the general parse path). Prints the median CPU and
wall ms of a NaN round per kind. With `--baseline TREE`, each tree runs in a child process with
PYTHONPATH=TREE, interleaved (this tree, then each baseline, `--runs` times).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACK = """
[[rule]]
id = "probe"
type = "match"
severity = "info"
pattern = 'ALERT id=(?P<id>\\d+)'
summary = "probe {text}"
"""
STEP = (
    "2026-11-28 14:02:07,199 INFO [train] step {n}/200000 | loss 2.1182 | acc 0.242 | "
    "lr 2.40e-05 | grad_norm 1.23 | tok/s 48292 | q_hs=19 q_hsb=[1,2,2,6,3,5]\n"
)
NAN = STEP.replace("loss 2.1182", "loss nan")
KINDS = ("dflash", "shapeless")


def child(rounds: int, files: int, kinds: list[str]) -> dict[str, list[float]]:
    """Median CPU and wall ms of a NaN round, per kind, in this process."""
    from logwatch.drivers.tail import TailDriver
    from logwatch.drivers.tail_options import TailOptions
    from logwatch.engine import Engine
    from logwatch.rules.loader import builtin_rules_dir, load_rules
    from logwatch.sinks.base import ListSink

    out: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pack = folder / "probe.toml"
        pack.write_text(PACK, encoding="utf-8")
        paths = [folder / f"rank{i:02d}.log" for i in range(files)]
        for i, path in enumerate(paths):
            path.write_text(STEP.format(n=i), encoding="utf-8")
        sink = ListSink()
        engine = Engine(load_rules([builtin_rules_dir(), pack]))
        tail = TailDriver(
            [str(folder / "*.log")], engine, sink, options=TailOptions(), watcher_factory=None
        )
        tail.open()
        step = 1000
        for kind in kinds:
            cpu: list[float] = []
            wall: list[float] = []
            for r in range(rounds + 20):  # the first 20: warm-up, not counted
                path = paths[r % files]
                step += 1
                nan = NAN.format(n=step)
                if kind == "shapeless":
                    nan = nan.replace("\n", f" ALERT id={step}\n")
                with path.open("a", encoding="utf-8") as log:
                    log.write(STEP.format(n=step))
                while tail.poll_once():
                    pass
                fired = len(sink.events)
                with path.open("a", encoding="utf-8") as log:
                    log.write(nan)
                c0, w0 = time.process_time(), time.perf_counter()
                while tail.poll_once():
                    pass
                c1, w1 = time.process_time(), time.perf_counter()
                if len(sink.events) == fired:
                    raise SystemExit(f"no alert for the {kind} NaN line of round {r}")
                if r >= 20:
                    cpu.append((c1 - c0) * 1e3)
                    wall.append((w1 - w0) * 1e3)
            out[kind] = [statistics.median(cpu), statistics.median(wall)]
        tail.close(checkpoint=False)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--baseline", action="append", default=[], type=Path)
    parser.add_argument("--kind", action="append", choices=KINDS, help="default: both")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.rounds, args.files, args.kind or list(KINDS))))
        return
    trees = [ROOT, *args.baseline]
    results: dict[Path, list[dict[str, list[float]]]] = {tree: [] for tree in trees}
    for run in range(args.runs):
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            cmd = [sys.executable, __file__, "--child", "--rounds", str(args.rounds)]
            cmd += ["--files", str(args.files)]
            cmd += [f"--kind={kind}" for kind in args.kind or ()]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            result = json.loads(done.stdout.splitlines()[-1])
            results[tree].append(result)
            load = os.getloadavg()[0]
            cells = ", ".join(f"{k} {v[0]:.2f} ms CPU ({v[1]:.2f} wall)" for k, v in result.items())
            print(f"run {run + 1} {tree}: {cells}  (load {load:.1f})", flush=True)
    kinds = args.kind or list(KINDS)
    print(f"\n| tree | {' | '.join(f'{kind} NaN line, CPU ms (runs)' for kind in kinds)} |")
    print("|---" * (len(kinds) + 1) + "|")
    for tree, runs in results.items():
        cells = [", ".join(f"{r[kind][0]:.2f}" for r in runs) for kind in kinds]
        print(f"| {tree} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
