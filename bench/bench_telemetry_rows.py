"""CPU cost of `telemetry_rows` (a batch's GPU snapshot keys, narrow) and of its parts.

Run: .venv/bin/python bench/bench_telemetry_rows.py LOG [--repeat 3] [--baseline FRAMES_PY]
(a realistic LOG: `python bench/gen_dflash.py /tmp/d100.log --mb 100`)

The log is framed and parsed once (not timed), block by block as replay reads it. Then, best
of `--repeat`, it measures process CPU time (all threads) over all blocks of:
  - `telemetry_rows`, for all metrics and for the built-in GPU rules' four;
  - `plain check`: the `PLAIN_PAIRS_LINE` match on the snapshot lines;
  - `_plain_rows`: the plain lines cut by position (by their templates, else split).
With `--baseline` (another checkout's `logwatch/gpu/frames.py`), each is measured for it too,
the two alternating run by run, and the medians are printed side by side.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import polars as pl

from logwatch.gpu import frames
from logwatch.parse import parse_block
from logwatch.sources.framing import read_blocks

BUILTIN_METRICS = frozenset({"util", "mem_gb", "mem_total_gb", "temp_c"})


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("baseline_frames", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cpu(fn: Callable[[Any], object], data: list[Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for item in data:
            fn(item)
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5, help="alternating runs with --baseline")
    parser.add_argument("--baseline", help="another checkout's logwatch/gpu/frames.py")
    args = parser.parse_args()
    with open(args.log, "rb") as log:
        blocks = list(read_blocks(log))
    columns = ["snapshot", "ts", "step"]
    parsed = [
        parse_block(b.text, source="x", first_line=b.first_line, columns=columns).frame
        for b in blocks
    ]
    snapshots = [
        f.select("ts", "text", "snapshot")
        .with_row_index("_log_row")
        .filter(pl.col("snapshot").fill_null(False))
        for f in parsed
    ]
    plain = [s.filter(pl.col("text").str.contains(frames.PLAIN_PAIRS_LINE)) for s in snapshots]
    cases: dict[str, tuple[Callable[[ModuleType], Callable[[Any], object]], list[Any]]] = {
        "telemetry_rows": (lambda m: m.telemetry_rows, parsed),
        "telemetry_rows, 4 metrics": (
            lambda m: lambda f: m.telemetry_rows(f, BUILTIN_METRICS),
            parsed,
        ),
        "plain check": (
            lambda m: lambda s: s.select(pl.col("text").str.contains(m.PLAIN_PAIRS_LINE)),
            snapshots,
        ),
        "_plain_rows": (lambda m: lambda s: m._plain_rows(s, None), plain),
    }
    modules = {"this": frames} | ({"baseline": _load(args.baseline)} if args.baseline else {})
    for f in parsed:  # the same rows, or the comparison means nothing
        rows = [m.telemetry_rows(f) for m in modules.values()]
        assert all(r.equals(rows[0]) for r in rows), "baseline rows differ"
    times: dict[tuple[str, str], list[float]] = {(c, m): [] for c in cases for m in modules}
    for _ in range(args.runs if args.baseline else 1):
        for case, (get, data) in cases.items():
            for name, module in modules.items():
                times[(case, name)].append(_cpu(get(module), data, args.repeat))
    mb = Path(args.log).stat().st_size / 1e6
    print(f"{args.log}: {mb:.0f} MB, {len(blocks)} blocks; CPU s, median of runs")
    for case in cases:
        cells = [f"{name} {statistics.median(times[(case, name)]):.3f}" for name in modules]
        print(f"  {case:28s} " + "  ".join(cells))


if __name__ == "__main__":
    main()
