"""The stateful rules on live batches: ms per 1-line batch of throughput-drop, nan-loss and
loss-spike, against their logic before the live paths (tests/support/stateful_reference.py), in the same
run. Each source gets a step line, then a NaN line (so nan-loss fires and resolves every batch).

Usage: python bench/bench_rules_live.py [--batches 400] [--runs 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from logwatch.rules.drop import DropRule
from logwatch.rules.nonfinite import NonFiniteRule
from logwatch.rules.spike import SpikeRule

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support import stateful_reference as reference

Step = Callable[[Any, pl.DataFrame, dict[str, Any]], Any]


def _lines(batches: int) -> list[pl.DataFrame]:
    """1-line frames: a step line with loss and throughput, then one with a NaN loss."""
    schema = {"loss": pl.Float64, "throughput": pl.Float64, "rank": pl.Int64, "text": pl.String}
    out = []
    for i in range(batches):
        loss = float("nan") if i % 2 else 2.0 + (i % 7) / 100
        text = f"step {i} | loss {loss} | tok/s {48000 + i % 13}"
        row = {"loss": [loss], "throughput": [48000.0 + i % 13], "rank": [None], "text": [text]}
        out.append(pl.DataFrame(row, schema=schema))
    return out


def _ms_per_batch(rule: Any, step: Step, frames: list[pl.DataFrame], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        state = rule.initial_state()
        start = time.perf_counter()
        for frame in frames:
            _, state = step(rule, frame, state)
        best = min(best, time.perf_counter() - start)
    return 1e3 * best / len(frames)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    frames = _lines(args.batches)
    cases: list[tuple[str, Any, Step]] = [
        ("throughput-drop", DropRule("throughput", 20, 0.5, 3), reference.drop),
        ("nan-loss", NonFiniteRule("loss"), reference.nonfinite),
        ("loss-spike", SpikeRule("loss", 30, 6.0, 0.1), reference.spike),
    ]
    print(f"{'rule':16s} {'before ms':>10s} {'now ms':>8s} {'speedup':>8s}")
    for name, rule, before in cases:
        old = _ms_per_batch(rule, before, frames, args.runs)
        new = _ms_per_batch(rule, lambda r, f, s: r.evaluate(f, s), frames, args.runs)
        print(f"{name:16s} {old:10.3f} {new:8.3f} {old / new:7.1f}x")


if __name__ == "__main__":
    main()
