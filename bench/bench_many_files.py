"""Replay of many files against the same bytes as one file (issue 30's and issue 36's rows).

Usage: python bench/bench_many_files.py [--runs 2] [--ranks 2048] [--ranks-mb 20]
                                        [--many 200] [--many-mb 1] [--size-mb 200]

Two sets, each timed in one run against its own baseline (interleaved, best of --runs):
- a fleet: `bench/gen_ranks.py`'s torchrun layout of --ranks ranks (2 048: 4 353 files, about
  --ranks-mb MB), the files in sorted order, against their concatenation as one file;
- --many files of --many-mb MB cut at line ends from the head of the realistic DFlash file of
  --size-mb MB (`bench_replay.split`), against that head as one file (--many 0: left out).
Each is `logwatch replay --format jsonl` with every built-in rule, its output to a pipe: wall
and CPU seconds (user + system; a loaded machine sways wall time much more), peak RSS, and the
ratios many / one (a fleet's files are sources of their own, so its events differ from
those of the one file; the DFlash pieces' too, at each cut). Set PYTHONPATH to another
tree's root to time that tree's code with the same interpreter (the console script adds no
folder of its own to sys.path).
"""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

import gen_ranks
from bench_replay import DATA, Tool, best, ensure_data, events, logwatch, run, split, warm


def fleet(ranks: int, mb: float) -> tuple[list[Path], Path]:
    """The fleet's files (generated once) and their concatenation."""
    folder = DATA / f"ranks-{ranks}-{mb:g}mb"
    if not folder.exists():
        gen_ranks.write(folder, ranks, mb)
    paths = sorted(p for p in folder.rglob("*") if p.is_file())
    one = DATA / f"ranks-{ranks}-{mb:g}mb-one.log"
    if not one.exists():
        one.write_bytes(b"".join(p.read_bytes() for p in paths))
    return paths, one


def head(size_mb: int, count: int, each_mb: int) -> tuple[list[Path], Path]:
    """`count` files of `each_mb` MB from the head of the realistic DFlash file, and that head."""
    source = ensure_data("dflash", size_mb)
    parts = split(source, count, each_mb)
    one = source.with_name(f"{source.stem}-{count}x{each_mb}mb.log")
    if not one.exists() or one.stat().st_mtime < parts[-1].stat().st_mtime:
        one.write_bytes(b"".join(p.read_bytes() for p in parts))
    return parts, one


def measure(name: str, paths: list[Path], one: Path, runs: int) -> list[str]:
    """A table row pair: one file, then the many; and the ratios."""
    warm(one, *paths)
    cmds = {
        "one file": [logwatch(), "replay", str(one), "--format", "jsonl"],
        f"{len(paths)} files": [logwatch(), "replay", *map(str, paths), "--format", "jsonl"],
    }
    tries: dict[str, list] = {key: [] for key in cmds}
    for _ in range(runs):
        for key, cmd in cmds.items():
            tries[key].append(run(Tool(key, cmd, events, env=dict(os.environ)), cmd))
    one_r, many_r = (best(tries[key]) for key in cmds)
    size = sum(p.stat().st_size for p in paths) / 1e6
    rows = []
    for key, r in ((f"one file ({size:.0f} MB)", one_r), (f"{len(paths)} files", many_r)):
        found = sum(r.found.values())
        rows.append(
            f"| {name} | {key} | {r.wall_s:.2f} | {r.cpu_s:.2f} | {r.rss_bytes / 2**20:.0f} | {found:,} |"
        )
    rows.append(
        f"| {name} | **many / one** | **{many_r.wall_s / one_r.wall_s:.2f}x** | "
        f"**{many_r.cpu_s / one_r.cpu_s:.2f}x** | | |"
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--ranks", type=int, default=2048, help="fleet ranks (0: no fleet)")
    parser.add_argument("--ranks-mb", type=float, default=20.0)
    parser.add_argument("--many", type=int, default=200, help="files cut from DFlash (0: none)")
    parser.add_argument("--many-mb", type=int, default=1)
    parser.add_argument("--size-mb", type=int, default=200, help="the DFlash file to cut from")
    args = parser.parse_args()
    print(
        f"{platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()} · "
        f"PYTHONPATH={os.environ.get('PYTHONPATH', '')!r} · load {os.getloadavg()[0]:.1f}\n"
    )
    print("| set | input | wall s | CPU s | peak RSS MiB | events |")
    print("|---|---|---:|---:|---:|---:|")
    if args.ranks:
        paths, one = fleet(args.ranks, args.ranks_mb)
        name = f"fleet, {args.ranks} ranks"
        print("\n".join(measure(name, paths, one, args.runs)), flush=True)
    if args.many:
        paths, one = head(args.size_mb, args.many, args.many_mb)
        name = f"DFlash, {args.many} x {args.many_mb} MB"
        print("\n".join(measure(name, paths, one, args.runs)), flush=True)
    print(f"\nload at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
