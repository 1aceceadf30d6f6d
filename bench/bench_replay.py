"""Replay throughput against baselines measured in the same run, on the same file.

Usage: python bench/bench_replay.py [--mb 700] [--runs 2] [--markdown]

Generates bench/data/dflash.log (DFlash-style, ~700 MB, ~5 M lines) if missing, then times:
  grep      `grep -c loss FILE` (the floor: a literal scan)
  pyloop    a plain Python loop applying one regex per line (the naive tool)
  replay    `logwatch replay FILE --format jsonl` with all built-in rules
Each is a subprocess; wall time is the best of --runs, peak RSS from wait4.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "dflash.log"
PYLOOP = r"""
import re, sys
rx = re.compile(r"loss[ =:]+(\S+)")
n = 0
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for line in f:
        m = rx.search(line)
        if m and m.group(1).lower().startswith(("nan", "inf", "-inf")):
            n += 1
print(n)
"""


def run(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one subprocess, output discarded."""
    # Output goes to a real file: GNU grep stops at the first match when stdout is /dev/null.
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"bench: {cmd[0]} failed with status {status}")
    return wall, usage.ru_maxrss * 1024


def best(cmd: list[str], runs: int) -> tuple[float, int]:
    results = [run(cmd) for _ in range(runs)]
    return min(r[0] for r in results), max(r[1] for r in results)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=700)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if not DATA.exists():
        subprocess.run(
            [sys.executable, str(HERE / "gen_dflash.py"), str(DATA), "--mb", str(args.mb)],
            check=True,
        )
    size = DATA.stat().st_size
    with DATA.open("rb") as f:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))
    logwatch = str(Path(sys.executable).with_name("logwatch"))
    results = {
        "grep -c loss": best(["grep", "-c", "loss", str(DATA)], max(args.runs, 3)),
        "python regex loop": best([sys.executable, "-c", PYLOOP, str(DATA)], 1),
        "logwatch replay": best([logwatch, "replay", str(DATA), "--format", "jsonl"], args.runs),
    }
    grep_s = results["grep -c loss"][0]
    rows = [
        "| command | wall s | x grep | lines/s | MB/s | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, (wall, rss) in results.items():
        rows.append(
            f"| {name} | {wall:.2f} | {wall / grep_s:.1f} | {lines / wall:,.0f} | {size / wall / 1e6:.0f} | {rss / 1e6:.0f} |"
        )
    header = (
        f"{date.today()} · {platform.machine()} · {os.cpu_count()} cores · Python {platform.python_version()} · "
        f"file {size / 1e6:.0f} MB, {lines:,} lines (warm page cache)"
    )
    print(header)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
