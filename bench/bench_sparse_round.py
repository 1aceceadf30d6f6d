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

Also, per kind, the polars queries of the last round (its step-line poll and its NaN poll) and
the distinct regex patterns they run (a literal `str.contains` counts: polars compiles it as a
regex too). Polars keeps 32 compiled regexes per thread: a round that runs more than that
compiles most of them again every round (BENCHMARKS.md, branch `sparse`). Counted by walking
each query's plan (a private polars hook: `--no-patterns` leaves it out).
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
import warnings
from pathlib import Path

from bench_tail import PACK, ROOT, STEP  # the same probe pack and DFlash step line

NAN = STEP.replace("loss 2.1182", "loss nan")
KINDS = ("dflash", "shapeless")


_REGEX_FUNCTIONS = {"Contains", "CountMatches", "Extract", "ExtractGroups", "ExtractAll", "Replace"}


def _patterns(node: object, out: set[str]) -> None:
    """The regex patterns (literal ones too) of a serialized polars plan, into `out`."""
    if isinstance(node, list):
        for item in node:
            _patterns(item, out)
        return
    if not isinstance(node, dict):
        return
    function = node.get("Function")
    if isinstance(function, dict) and isinstance(function.get("function"), dict):
        string = function["function"].get("StringExpr")
        name, arg = next(iter(string.items())) if isinstance(string, dict) else (string, None)
        if name in _REGEX_FUNCTIONS:
            inputs = function.get("input", [])
            if isinstance(arg, dict) and "pat" in arg:
                out.add(arg["pat"])
            elif len(inputs) > 1:
                literal = inputs[1].get("Literal", {}).get("Scalar", {}).get("String")
                out.add(literal if isinstance(literal, str) else json.dumps(inputs[1]))
    for value in node.values():
        _patterns(value, out)


class _Queries:
    """Counts the queries polars runs while `on`, and the distinct patterns they run."""

    def __init__(self) -> None:
        from polars.lazyframe import engine

        self.on, self.queries, self.patterns = False, 0, set[str]()
        original = engine._LocalEngine.collect

        def collect(engine_self: object, lf: object, **kwargs: object) -> object:
            if self.on:
                self.queries += 1
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    _patterns(json.loads(lf.serialize(format="json")), self.patterns)  # type: ignore[attr-defined]
            return original(engine_self, lf, **kwargs)

        engine._LocalEngine.collect = collect  # type: ignore[method-assign]


def child(rounds: int, files: int, kinds: list[str], patterns: bool) -> dict[str, list[float]]:
    """Median CPU and wall ms of a NaN round, per kind, in this process (and, with `patterns`,
    the last round's queries and distinct regex patterns)."""
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
            counter = _Queries() if patterns else None
            for r in range(rounds + 20):  # the first 20: warm-up, not counted
                if counter is not None:
                    counter.on = r == rounds + 19  # the last round's two polls
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
            if counter is not None:
                out[kind] += [counter.queries, len(counter.patterns)]
                counter.on = False
        tail.close(checkpoint=False)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--baseline", action="append", default=[], type=Path)
    parser.add_argument("--kind", action="append", choices=KINDS, help="default: both")
    parser.add_argument("--no-patterns", action="store_true", help="count no regex patterns")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kinds = args.kind or list(KINDS)
        print(json.dumps(child(args.rounds, args.files, kinds, not args.no_patterns)))
        return
    trees = [ROOT, *args.baseline]
    results: dict[Path, list[dict[str, list[float]]]] = {tree: [] for tree in trees}
    for run in range(args.runs):
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            cmd = [sys.executable, __file__, "--child", "--rounds", str(args.rounds)]
            cmd += ["--files", str(args.files)]
            cmd += [f"--kind={kind}" for kind in args.kind or ()]
            cmd += ["--no-patterns"] if args.no_patterns else []
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            result = json.loads(done.stdout.splitlines()[-1])
            results[tree].append(result)
            load = os.getloadavg()[0]
            cells = ", ".join(
                f"{k} {v[0]:.2f} ms CPU ({v[1]:.2f} wall"
                + (f"; {v[2]} queries, {v[3]} patterns)" if len(v) > 2 else ")")
                for k, v in result.items()
            )
            print(f"run {run + 1} {tree}: {cells}  (load {load:.1f})", flush=True)
    kinds = args.kind or list(KINDS)
    print(f"\n| tree | {' | '.join(f'{kind} NaN line, CPU ms (runs)' for kind in kinds)} |")
    print("|---" * (len(kinds) + 1) + "|")
    for tree, runs in results.items():
        cells = [", ".join(f"{r[kind][0]:.2f}" for r in runs) for kind in kinds]
        print(f"| {tree} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
