"""A fleet's report against its replay: `logwatch report RUN -o FILE` and `logwatch replay RUN
--format jsonl` on the same run's folder, alternately in one run (the machine may be loaded:
compare the ratios, not the seconds), with the HTML's size and whether the verdict is at its top.

    python bench/gen_fleet.py /tmp/f2048 --ranks 2048 --steps 100 --seed 1
    python bench/bench_report_fleet.py /tmp/f2048 [--runs 2] [--jobs N]

Each way is a subprocess; CPU is user+sys of it and the processes it spawned (`--jobs`)."""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fleet import _run  # (wall s, CPU s, peak RSS MB, stdout) of `logwatch ARGS`


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the run's folder (bench/gen_fleet.py)")
    parser.add_argument("--runs", type=int, default=1, help="each way this many times (best)")
    parser.add_argument("--jobs", type=int, default=None, help="--jobs for both (default: none)")
    args = parser.parse_args()
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []
    out = Path(tempfile.mkdtemp(prefix="report-fleet-")) / "report.html"
    replays: list[tuple[float, float]] = []
    reports: list[tuple[float, float]] = []
    jsonl = ""
    for _ in range(args.runs):
        wall, cpu, _, jsonl = _run(["replay", str(args.run), "--format", "jsonl", *jobs])
        replays.append((wall, cpu))
        print(f"replay : {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
        wall, cpu, _, _ = _run(["report", str(args.run), "-o", str(out), *jobs])
        reports.append((wall, cpu))
        print(f"report : {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
    (rw, rc), (pw, pc) = min(replays), min(reports)
    html = out.read_text(encoding="utf-8")
    print(f"best   : replay {rw:.1f} s / {rc:.1f} s CPU, report {pw:.1f} s / {pc:.1f} s CPU")
    print(f"ratio  : {pw / rw:.2f}x wall, {pc / rc:.2f}x CPU")
    print(f"HTML   : {len(html.encode()) / 1e6:.2f} MB")
    verdicts = [json.loads(line) for line in jsonl.splitlines() if '"root-cause"' in line]
    rank = verdicts[0]["labels"]["rank"] if verdicts else None
    top = re.search(r"</h1>(.*?)</section>", html, re.S)
    right = top is not None and f"<dt>rank</dt><dd>{rank}</dd>" in top.group(1)
    print(f"verdict: {'at the top, rank ' + str(rank) if right else 'NOT at the top'}")


if __name__ == "__main__":
    main()
