"""`logwatch report` against `logwatch replay` on the same file, in the same run.

Usage: python bench/bench_report.py [FILE] [--runs 3] [--base DIR]

Times `replay --format jsonl` (the baseline), `report -o FILE` and `replay --export FILE`:
wall seconds and CPU seconds (user + sys: the report's reduction runs on a thread beside the
engine, so on a loaded machine the two can tell different stories).

FILE defaults to bench/data/dflash.log (made by bench_replay.py). Runs are interleaved
(replay, report, replay, report, ...) so machine load hits both alike; the best of --runs is
kept. `--base DIR`: also time `replay` with the `logwatch` package found in DIR (e.g. a
`git archive main logwatch` export), to check a parse change for regressions.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLI = "from logwatch.cli import main; main()"


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int, float]:
    """Wall seconds, peak RSS (bytes) and CPU seconds of one subprocess, its stdout to a file."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"bench: {' '.join(cmd[:4])} failed with status {status}")
    return wall, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file", nargs="?", default=str(HERE / "data" / "dflash.log"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--base", default=None)
    args = parser.parse_args()
    html = Path(tempfile.mkdtemp()) / "report.html"
    parquet = html.with_name("frames.parquet")
    py = sys.executable
    cmds: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "replay": ([py, "-c", CLI, "replay", args.file, "--format", "jsonl"], None),
        "report": ([py, "-c", CLI, "report", args.file, "-o", str(html)], None),
        "replay --export": (
            [py, "-c", CLI, "replay", args.file, "--format", "jsonl", "--export", str(parquet)],
            None,
        ),
    }
    if args.base:
        env = {**os.environ, "PYTHONPATH": args.base}
        cmds["replay (base)"] = ([py, "-c", CLI, "replay", args.file, "--format", "jsonl"], env)
    results: dict[str, list[tuple[float, int, float]]] = {name: [] for name in cmds}
    for _ in range(args.runs):
        for name, (cmd, env) in cmds.items():
            results[name].append(timed(cmd, env))
    best = {name: min(r[0] for r in runs) for name, runs in results.items()}
    cpu = {name: min(r[2] for r in runs) for name, runs in results.items()}
    size = Path(args.file).stat().st_size
    print(f"file {size / 1e6:.0f} MB · {os.cpu_count()} cores · best of {args.runs}, interleaved")
    print("| command | wall s | x replay | CPU s | x replay | peak RSS MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, runs in results.items():
        rss = max(r[1] for r in runs)
        print(
            f"| {name} | {best[name]:.2f} | {best[name] / best['replay']:.2f} "
            f"| {cpu[name]:.2f} | {cpu[name] / cpu['replay']:.2f} | {rss / 1e6:.0f} |"
        )
    print(f"report file: {html.stat().st_size / 1024:.0f} KiB")
    print(f"export file: {parquet.stat().st_size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
