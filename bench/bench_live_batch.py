"""What one live round costs: `parse_block` and `Engine.process` on one-line batches.

Usage: python bench/bench_live_batch.py [--batches 400] [--sources 50]

`tail` hands the parser and the rules batches of a line or two, where polars' fixed cost per call,
not the lines, sets the time. This replays what `bench_tail.py`'s sparse part writes (a step line,
then a NaN line, to one of `--sources` files in turn) through the built-in rules in-process, and
prints the wall ms per batch (p50 / p90) of the parse and of the engine, for the DFlash NaN line
(a line shape) and for the same line with a probe suffix (no shape fits: the general path), then
the engine's ms per batch for each rule (the rules that cost over 0.01 ms). A diagnostic of the
round that `bench_tail.py` times end to end; no baseline tool does this part.
"""

from __future__ import annotations

import argparse
import collections
import time
from typing import Any

import polars as pl

from logwatch.api import load_rules
from logwatch.drivers.plugins import parse_columns
from logwatch.engine import Engine
from logwatch.parse import parse_block

STEP = (
    "2026-11-28 14:02:07,199 INFO [train] step {n}/200000 | loss 2.1182 | acc 0.242 | "
    "lr 2.40e-05 | grad_norm 1.23 | tok/s 48292 | q_hs=19 q_hsb=[1,2,2,6,3,5]"
)
NAN = STEP.replace("loss 2.1182", "loss nan")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] * 1e3


def run(batches: int, sources: int, suffix: str) -> dict[str, Any]:
    """Parse and engine wall seconds per batch, and per rule, for `batches` one-line batches."""
    engine = Engine(load_rules())
    columns = parse_columns(engine.every_column, [])
    names = [f"run{i:02d}.log" for i in range(sources)]
    lines = dict.fromkeys(names, 1)
    per_rule: dict[str, float] = collections.defaultdict(float)
    guarded = engine._guarded

    def timed(spec: Any, source: str, state: Any, step: Any) -> Any:
        start = time.perf_counter()
        try:
            return guarded(spec, source, state, step)
        finally:
            per_rule[spec.id] += time.perf_counter() - start

    parse_s: list[float] = []
    engine_s: list[float] = []
    for i in range(batches + 100):  # the first 100 warm up
        if i == 100:
            engine._guarded = timed  # type: ignore[method-assign]
        source = names[i % sources]
        text = (NAN if i % 2 else STEP).format(n=i) + (suffix if i % 2 else "")
        start = time.perf_counter()
        parsed = parse_block(
            pl.Series("text", [text]),
            source=source,
            first_line=lines[source],
            default_year=2026,
            columns=columns,
        )
        middle = time.perf_counter()
        engine.process(parsed.frame, columns)
        end = time.perf_counter()
        lines[source] += 1
        if i >= 100:
            parse_s.append(middle - start)
            engine_s.append(end - middle)
    return {"parse": parse_s, "engine": engine_s, "rules": per_rule, "n": batches}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--sources", type=int, default=50)
    args = parser.parse_args()
    results = {
        "DFlash step line": run(args.batches, args.sources, ""),
        "no known shape": run(args.batches, args.sources, " ALERT id=7"),
    }
    print("| NaN line | parse p50 / p90 ms | engine p50 / p90 ms |\n|---|---|---|")
    for kind, r in results.items():
        p, e = r["parse"], r["engine"]
        print(
            f"| {kind} | {_pct(p, 50):.2f} / {_pct(p, 90):.2f} | {_pct(e, 50):.2f} / {_pct(e, 90):.2f} |"
        )
    rules = results["DFlash step line"]["rules"]
    print("\n| rule (DFlash lines) | engine ms per batch |\n|---|---:|")
    for rule, seconds in sorted(rules.items(), key=lambda item: -item[1]):
        if seconds / args.batches >= 1e-5:
            print(f"| {rule} | {seconds / args.batches * 1e3:.3f} |")


if __name__ == "__main__":
    main()
