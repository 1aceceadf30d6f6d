"""CPU time of framing (`read_blocks`: bytes to numbered lines) against the pre-issue-9 framing
measured in the same run, on the same file.

Usage: python bench/bench_framing.py FILE [--runs 3]

The baseline frames each block the framer hands out with tests/support/framing_reference.py (every
fix-up built for every row, the over-long check on every block); today's `LineFramer.feed`
is shared, so the baseline leaves out the old framer's two extra copies of each read. Runs
alternate, each the process CPU time (all threads) of one pass; prints the best of --runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from logwatch.sources.framing import DEFAULT_BLOCK_BYTES, LineFramer, read_blocks
from tests.support.framing_reference import reference_lines_to_series


def framed(path: str) -> int:
    """Lines of `path` as `read_blocks` frames them."""
    with open(path, "rb") as stream:
        return sum(block.count for block in read_blocks(stream))


def framed_by_reference(path: str) -> int:
    """Lines of `path` with each block framed by the reference."""
    framer, lines = LineFramer(), 0
    with open(path, "rb") as stream:
        while chunk := stream.read(DEFAULT_BLOCK_BYTES):
            if complete := framer.feed(chunk):
                lines += reference_lines_to_series(complete).len()
        if tail := framer.flush():
            lines += reference_lines_to_series(tail).len()
    return lines


def cpu_s(frame: Callable[[str], int], path: str) -> tuple[float, int]:
    start = time.process_time()
    lines = frame(path)
    return time.process_time() - start, lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"reference": [], "read_blocks": []}
    counts = set()
    for _ in range(args.runs):
        for name, frame in (("reference", framed_by_reference), ("read_blocks", framed)):
            cpu, lines = cpu_s(frame, args.file)
            times[name].append(cpu)
            counts.add(lines)
    if len(counts) != 1:
        raise SystemExit(f"bench: line counts differ: {sorted(counts)}")
    size_mb = Path(args.file).stat().st_size / 1e6
    base = min(times["reference"])
    print(f"{args.file}: {size_mb:.0f} MB, {counts.pop():,} lines, best of {args.runs}")
    for name, runs in times.items():
        print(f"  {name:12s} {min(runs):.3f} s CPU  {min(runs) / base:.2f}x reference")


if __name__ == "__main__":
    main()
