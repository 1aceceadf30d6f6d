"""Fleet post-mortem: the replay of a generated failed run's folder against the same bytes as one
file, the driver's peak RSS, and whether the verdict names the culprit.

    python bench/bench_fleet.py --ranks 256 [--out /tmp/fleet-256]

Prints one line per measure; ratios are against the one-file replay measured in the same run
(the machine may be loaded: compare ratios, not seconds)."""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_fleet import FleetSpec, generate


def _run(args: list[str]) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MB of the child, stdout) of `logwatch` with `args`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "logwatch", *args], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        raise SystemExit(f"logwatch {' '.join(args[:2])} failed: {done.stderr.strip()}")
    return wall, cpu, after.ru_maxrss / 1024, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(f"/tmp/logwatch-fleet-{args.ranks}")
    if out.exists():
        shutil.rmtree(out)
    run = generate(out / "run", FleetSpec(ranks=args.ranks, steps=args.steps, seed=7))
    size = sum(p.stat().st_size for p in run.files)
    joined = out / "joined.log"
    with joined.open("wb") as sink:
        for path in run.files:
            sink.write(path.read_bytes())
    print(f"{args.ranks} ranks, {len(run.files)} files, {size / 1e6:.1f} MB")
    one_wall, one_cpu, _, _ = _run(["replay", str(joined)])
    wall, cpu, rss, text = _run(["replay", str(run.root)])
    first = text.splitlines()[0]
    print(f"one file : {one_wall:.1f} s wall, {one_cpu:.1f} s CPU")
    print(f"folder   : {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {rss:.0f} MB")
    print(f"ratio    : {wall / one_wall:.1f}x wall, {cpu / one_cpu:.1f}x CPU")
    _, _, _, jsonl = _run(["replay", str(run.root), "--format", "jsonl"])
    verdicts = [json.loads(line) for line in jsonl.splitlines() if '"root-cause"' in line]
    labels = verdicts[0]["labels"] if verdicts else {}
    right = (
        len(verdicts) == 1
        and labels.get("rank") == str(run.culprit_rank)
        and labels.get("host") == run.culprit_host
        and labels.get("basis") == "first-error"
        and " root-cause " in first
    )
    print(f"verdict  : {'right' if right else 'WRONG'}: {first[:160]}")


if __name__ == "__main__":
    main()
