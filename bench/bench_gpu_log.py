"""CPU cost of the GPU rules on a log's own `gpu/<i>/...` snapshot keys, as the engine runs them.

Run: .venv/bin/python bench/bench_gpu_log.py LOG [--repeat 3]
(a realistic LOG: `python bench/gen_dflash.py /tmp/d100.log --mb 100`)

The log is parsed once (not timed). Then, block by block and best of `--repeat`, it measures
process CPU time (all threads) of:
  - `gpu keys`: what the parser spends for the GPU path on snapshot lines: the `telemetry`
    column and `gpu_keys` from it (the wide path), or `gpu_key_count` over the text (the narrow
    path, where the `telemetry` column is not needed);
  - `gpu rules`: the engine's GPU step of each built-in GPU rule a log can fire (gpu-idle,
    gpu-memory-high, gpu-hot) on one shared per-batch GPU frame, state carried across blocks.
Pass `--wide` to time the wide path with this checkout's rules (the whole GPU frame, pivoted,
handed to `evaluate_gpu`), for a ratio in the same run; `--shared-pairs` to time the narrow path
with the pairs extracted once for both (`logwatch.parse.telemetry.PAIRS_COLUMN`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import polars as pl

from logwatch.drivers.replay import scan_log
from logwatch.engine.gpu_rows import _gpu_step, _LazyGpuFrame
from logwatch.parse.sparse import _sparse
from logwatch.parse.telemetry import _telemetry
from logwatch.rules.gpu import is_gpu_rule, needs_nvml
from logwatch.rules.loader import builtin_rules_dir, load_pack

KEEP = ["ts", "text", "snapshot", "gpu_keys", "telemetry"]


def best(fn: Callable[[], object], repeat: int) -> float:
    """Least process CPU seconds of `repeat` calls of fn."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def gpu_keys_cost(frames: list[pl.DataFrame], *, wide: bool, shared: bool = False) -> None:
    """The parser's GPU work on each block's snapshot lines (with `shared`, the pairs column is
    left in the frame for the rules)."""
    for i, frame in enumerate(frames):
        rows = frame.get_column("snapshot")
        if wide:
            telemetry = _sparse(frame, rows, _telemetry(), "telemetry")
            keys = pl.col("telemetry").list.eval(
                pl.element().struct.field("key").str.starts_with("gpu/").cast(pl.UInt32)
            )
            pl.DataFrame([telemetry]).select(keys.list.sum())
        elif shared:
            from logwatch.parse.telemetry import PAIRS_COLUMN, gpu_key_count, telemetry_pairs

            indexed = frame.drop(PAIRS_COLUMN, strict=False).with_row_index("_i")
            found = indexed.filter(rows).select("_i", telemetry_pairs().alias(PAIRS_COLUMN))
            joined = indexed.join(found, on="_i", how="left", maintain_order="left")
            frames[i] = joined.drop("_i")
            frames[i].select(gpu_key_count(pl.col(PAIRS_COLUMN)))
        else:
            from logwatch.parse.telemetry import gpu_key_count

            _sparse(frame, rows, gpu_key_count(), "gpu_keys")


def gpu_rules_cost(frames: list[pl.DataFrame], rules: list[Any], *, wide: bool) -> None:
    """Every GPU rule's step on every block, one shared GPU frame per block."""
    states = [rule.initial_state() for rule in rules]
    for frame in frames:
        lazy = _LazyGpuFrame(frame)
        for i, rule in enumerate(rules):
            if wide:
                _, states[i] = rule.evaluate_gpu(lazy.get(), states[i])
            else:
                _, states[i] = _gpu_step(rule, lazy, states[i])


def main() -> None:
    """Parse the log, then print the CPU seconds of each measured stage."""
    parser = argparse.ArgumentParser()
    parser.add_argument("log", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--wide", action="store_true")
    parser.add_argument("--shared-pairs", action="store_true")
    args = parser.parse_args()
    frames = [frame.select(KEEP) for frame in scan_log(args.log)]
    specs = load_pack(builtin_rules_dir() / "gpu.toml")
    rules = [s.rule for s in specs if is_gpu_rule(s.rule) and not needs_nvml(s.rule)]
    ids = [s.id for s in specs if is_gpu_rule(s.rule) and not needs_nvml(s.rule)]
    print(f"{args.log}: {sum(f.height for f in frames):,} lines, {len(frames)} blocks; {ids}")
    keys = best(
        lambda: gpu_keys_cost(frames, wide=args.wide, shared=args.shared_pairs), args.repeat
    )
    gpu = best(lambda: gpu_rules_cost(frames, rules, wide=args.wide), args.repeat)
    path = "wide" if args.wide else "shared pairs" if args.shared_pairs else "engine"
    print(f"{path}: gpu keys {keys:.3f} s, gpu rules {gpu:.3f} s, total {keys + gpu:.3f} s CPU")


if __name__ == "__main__":
    main()
