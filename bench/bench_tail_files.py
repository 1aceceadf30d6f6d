"""`logwatch tail` over many files: catch-up time, idle CPU and state-directory writes at rest.

Usage: python bench/bench_tail_files.py [--files 2000] [--baseline-files 20] [--lines 200]
                                        [--idle-s 10]

For each of a baseline (--baseline-files) and the big set (--files), in the same run: that many
files of --lines training-log lines each are created; `logwatch tail` (built-in rules, catch-up
start, its own state directory) is started on them as a subprocess and timed until every file
is caught up; then, with nothing written, its CPU time (all threads, /proc/PID/stat) and the
bytes it writes (/proc/PID/io wchar: stdout is silent at rest, so this is the state directory)
over --idle-s seconds; then the same while one file grows by 10 lines/s (checkpoints are due
every second). The ratios big / baseline say how the costs grow with the file count.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEP = (
    "2026-11-28 14:02:07,199 INFO [train] step {n}/200000 | loss 2.1182 | acc 0.242 | "
    "lr 2.40e-05 | grad_norm 1.23 | tok/s 48292\n"
)
TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def _wchar(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    return 0


def measure(files: int, lines: int, idle_s: float) -> dict[str, float]:
    """Catch-up seconds, idle CPU %, state bytes/s at rest and checkpoint size for `files`."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        body = "".join(STEP.format(n=n) for n in range(1, lines + 1)).encode()
        for i in range(files):
            (folder / f"run{i:05}.log").write_bytes(body)
        state = folder / "state"
        cmd = [sys.executable, "-m", "logwatch", "tail", str(folder / "*.log"), "--gpu", "off"]
        cmd += ["--format", "jsonl", "--state-dir", str(state)]
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        caught = threading.Event()
        count = [0]

        def pump() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                count[0] += "caught up on" in line
                if count[0] >= files:
                    caught.set()

        threading.Thread(target=pump, daemon=True).start()
        try:
            if not caught.wait(600):
                raise SystemExit(f"not caught up after 600 s ({count[0]} of {files})")
            catch_up = time.perf_counter() - start
            time.sleep(3.0)  # the first checkpoint after catch-up, the watcher settling
            cpu0, w0, t0 = _cpu_s(proc.pid), _wchar(proc.pid), time.perf_counter()
            time.sleep(idle_s)
            cpu1, w1, t1 = _cpu_s(proc.pid), _wchar(proc.pid), time.perf_counter()
            size = (state / "checkpoint.json").stat().st_size
            active = folder / "run00000.log"  # one file growing, 10 lines/s, no alerts
            w2, t2 = _wchar(proc.pid), time.perf_counter()
            with open(active, "a") as out:
                for n in range(int(idle_s * 10)):
                    out.write(STEP.format(n=lines + n + 1))
                    out.flush()
                    time.sleep(0.1)
            w3, t3 = _wchar(proc.pid), time.perf_counter()
        finally:
            proc.terminate()
            proc.wait(60)
    return {
        "catch_up_s": catch_up,
        "idle_cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
        "state_bytes_per_s": (w1 - w0) / (t1 - t0),
        "checkpoint_bytes": size,
        "state_bytes_per_s_1_active": (w3 - w2) / (t3 - t2),
    }


def main() -> None:
    """Run the baseline and the big set, print both and their ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--baseline-files", type=int, default=20)
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--idle-s", type=float, default=10.0)
    args = parser.parse_args()
    base = measure(args.baseline_files, args.lines, args.idle_s)
    big = measure(args.files, args.lines, args.idle_s)
    print(f"{'':22}{args.baseline_files:>12} files{args.files:>12} files{'ratio':>10}")
    for key in base:
        ratio = big[key] / base[key] if base[key] else float("inf")
        print(f"{key:22}{base[key]:>18.2f}{big[key]:>18.2f}{ratio:>10.1f}")


if __name__ == "__main__":
    main()
