"""Many rank logs in process, on `--jobs 1` and `--jobs 2`, against the same bytes as one file,
for this checkout and a baseline checkout, in one run (issue 36's many-files rows).

    python bench/bench_ranks_jobs.py RUN_DIR --baseline /tmp/base [--ways in-process,jobs-1]

RUN_DIR is a run of `gen_ranks.py` (`write(Path(RUN_DIR), 256, 2.5)`). Each command is
`python -m logwatch replay --format jsonl ...` in a subprocess (the baseline's with PYTHONPATH
set to its checkout, the same interpreter), writing to a file; the two checkouts alternate per
way, so a load change on a shared machine hits both alike. Prints wall and CPU seconds (the
command and the processes it waited for) and peak RSS, and whether each way's output is the
one-process output of the same checkout, byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# `replay` without --jobs, in this process whatever the input's size (over 16 MB the default
# is --jobs CORES): the CLI with the threshold raised, as a user cannot ask
IN_PROCESS = (
    "import logwatch.cli.jobs as jobs; jobs.SMALL_INPUT_BYTES = 1 << 62; "
    "from logwatch.cli import run; run()"
)
WAYS = {
    "in-process": [],
    "jobs-1": ["--jobs", "1"],
    "jobs-2": ["--jobs", "2"],
    "one-file": [],
}


def timed(
    args: list[str], out: Path, pythonpath: str | None, *, here: bool = False
) -> tuple[float, float, float]:
    """Wall s, CPU s and peak RSS MB (of the command: the client, the largest process it
    waited for) of `python -m logwatch replay --format jsonl ARGS`."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    peak = out.with_suffix(".rss")
    command = ["/usr/bin/time", "-f", "%M", "-o", str(peak), sys.executable]
    command += ["-c", IN_PROCESS] if here else ["-m", "logwatch"]
    command += ["replay", "--format", "jsonl", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with out.open("wb") as sink:
        # not in a checkout: `-m` puts the working folder first on the path
        subprocess.run(command, stdout=sink, env=env, check=True, cwd=out.parent)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, int(peak.read_text().split()[-1]) / 1024


def one_file(run: Path) -> Path:
    """Every file of the run, in order, as one file (the same bytes)."""
    target = Path(tempfile.gettempdir()) / f"{run.name}.one.log"
    if not target.exists():
        files = sorted(p for p in run.rglob("*") if p.is_file())
        with target.open("wb") as sink:
            for path in files:
                sink.write(path.read_bytes())
    return target


def main() -> None:
    """Time each way for both checkouts; print a Markdown table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--baseline", default=None, help="the baseline checkout (PYTHONPATH)")
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--baseline-ways", default=None, help="default: --ways")
    opts = parser.parse_args()
    ways = opts.ways.split(",")
    base_ways = (opts.baseline_ways or opts.ways).split(",")
    single = one_file(opts.run_dir)
    work = Path(tempfile.mkdtemp(prefix="bench-ranks-"))
    rows = []
    digests: dict[tuple[str, str], str] = {}
    for way in ways:
        target = str(single) if way == "one-file" else str(opts.run_dir)
        args = [] if way in ("in-process", "one-file") else WAYS[way]
        checkouts = [("this", None)]
        if opts.baseline and way in base_ways:
            checkouts.insert(0, ("baseline", opts.baseline))
        for name, path in checkouts:
            out = work / f"{name}-{way}.jsonl"
            wall, cpu, rss = timed([*args, target], out, path, here=way == "in-process")
            digests[(name, way)] = hashlib.sha256(out.read_bytes()).hexdigest()
            rows.append((name, way, wall, cpu, rss))
            print(f"{name} {way}: {wall:.1f} s wall, {cpu:.1f} s CPU, {rss:.0f} MB", flush=True)
    files = sum(1 for p in opts.run_dir.rglob("*") if p.is_file())
    print(f"\n{opts.run_dir} ({files} files, {single.stat().st_size / 1e6:.1f} MB); load "
          f"{os.getloadavg()[0]:.1f} at the end")  # fmt: skip
    if ("baseline", "in-process") in digests:
        same = digests[("baseline", "in-process")] == digests[("this", "in-process")]
        print(f"this checkout's in-process output = the baseline's, byte for byte: {same}")
    # the reference: the checkout's in-process output, else its --jobs 1 output (a run
    # without the in-process way compares --jobs 2 with --jobs 1)
    ref = "in-process" if any(way == "in-process" for _, way, *_ in rows) else "jobs-1"
    print(f"| checkout | way | wall s | CPU s | peak RSS MB | output = {ref} |")
    print("|---|---|---:|---:|---:|---|")
    for name, way, wall, cpu, rss in rows:
        same = digests.get((name, ref)) == digests[(name, way)]
        mark = "-" if way in (ref, "one-file") else ("yes" if same else "NO")
        print(f"| {name} | {way} | {wall:.1f} | {cpu:.1f} | {rss:.0f} | {mark} |")


if __name__ == "__main__":
    main()
