"""`logwatch tail`'s CPU while a busy node writes realistic DFlash lines (issue 30's live rows).

Usage: python bench/bench_tail_cpu.py [--load 8x10 --load 200x1 ...] [--all] [--seconds 30]
                                      [--gpu off|auto] [--burst-mb 1024]
                                      [--max-batch-delay 1s ...]

For each load FILESxRATE (default: the issue's two targets, 8 files x 10 lines/s, one node with
one log per rank, and 200 files x 1 line/s; --all adds 1x1, 8x1 and 1x10): that many files are
created with a run's first lines; `logwatch tail` (built-in rules, --from-end, JSONL, its own
state directory) follows them as a subprocess; once it has said it follows every file, a writer
process appends lines of the realistic DFlash mix (bench/gen_dflash.py's step, queue, data,
8-GPU snapshot and warning lines; each file its own stretch of the first two runs, the second of
which diverges into NaN; no `run start:` line) to each file at RATE lines/s, spread evenly. After 3 s of writing, the follower's CPU time (utime + stime,
/proc/PID/stat) is read over --seconds: its share of one core, and per line written. Then a
NaN step line goes to the first file and the nan-loss alert must come back (the follower kept
up and was alive), and the time it took is shown. Loaded machine: each figure is the follower's
own CPU time, which load does not inflate much (wall-clock waits are not counted).
--burst-mb N (0: none): the realistic DFlash file of N MB (bench_replay.py's, generated when
missing) is appended as fast as the disk takes it to one followed file, then a restart and a
NaN step line; catch-up speed is its size over the time from the first write to that line's
nan-loss alert, against `logwatch replay` (all rules) of the same file, timed in the same run.
--max-batch-delay D (repeatable): each load is measured with `tail --max-batch-delay D` for each
D given, in turn (default: tail's own default; the option is left out, so a tree from before it
can be measured as the baseline: PYTHONPATH=old-tree). The NaN line is written while the load
still runs, so its time to alert is the latency under that sustained load.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import gen_dflash
from bench_replay import ensure_data, warm

import logwatch

TICK = os.sysconf("SC_CLK_TCK")
TARGETS = {(8, 10): 3.0, (200, 1): 10.0}  # % of one core, issue 30
WRITER = r"""
import os, sys, time
rate, seconds, pool_path, *paths = sys.argv[1:]
rate, seconds = float(rate), float(seconds)
lines = open(pool_path, "rb").read().splitlines(keepends=True)
fds = [os.open(p, os.O_WRONLY | os.O_APPEND) for p in paths]
stride = len(lines) // len(fds)
start, written = time.monotonic(), 0
period = 1.0 / (rate * len(fds))  # one line somewhere every `period`, files in turn
n = 0
while (now := time.monotonic()) - start < seconds:
    due = start + n * period
    if due > now:
        time.sleep(due - now)
    file = n % len(fds)
    os.write(fds[file], lines[(file * stride + n // len(fds)) % len(lines)])
    n += 1
print(n, time.monotonic() - start, flush=True)
"""
NAN = (
    "2026-11-01 03:00:00,000 INFO [train] step 999999/200000 | loss nan | acc 0.000 | "
    "lr 2.40e-05 | grad_norm nan | tok/s 50112 | q_hs=31 q_hsb=[1,2,2,5,5,16]\n"
)


def pool(folder: Path, count: int = 60_000) -> Path:
    """The first `count` lines of the realistic DFlash file (its first two runs), less the
    `run start:` headers (a restart mid-benchmark would measure something else)."""
    rng = random.Random(42)
    lines = itertools.islice(
        (line for chunk in gen_dflash.realistic(rng) for line in chunk.splitlines()), count
    )
    out = folder / "pool.log"
    out.write_text("".join(f"{line}\n" for line in lines if "run start:" not in line))
    return out


def cpu_s(pid: int) -> float:
    """CPU seconds of a process (all threads) and its reaped children."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / TICK


class Follower:
    """`logwatch tail` on the files, its stdout and stderr read by threads."""

    def __init__(self, folder: Path, files: int, gpu: str, delay: str | None = None) -> None:
        logwatch = str(Path(sys.executable).with_name("logwatch"))
        cmd = [logwatch, "tail", str(folder / "*.log"), "--from-end", "--format", "jsonl"]
        cmd += ["--state-dir", str(folder / "state"), "--gpu", gpu]
        cmd += [] if delay is None else ["--max-batch-delay", delay]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.ready, self.alerts = threading.Event(), queue.Queue[str]()
        self._files, self._followed = files, 0
        threading.Thread(target=self._stderr, daemon=True).start()
        threading.Thread(target=self._stdout, daemon=True).start()

    def _stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._followed += "following from its end" in line
            if self._followed >= self._files:
                self.ready.set()

    def _stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.alerts.put(line)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)


def measure(
    files: int, rate: float, seconds: float, gpu: str, pool_log: Path, delay: str | None
) -> dict[str, float]:
    """The follower's CPU share and CPU per line at `files` x `rate` lines/s, and how long a
    NaN line written while that load goes on takes to its alert."""
    with tempfile.TemporaryDirectory(prefix="bench_tail_cpu.") as tmp:
        folder = Path(tmp)
        header = pool_log.read_text().splitlines(keepends=True)[:3]
        paths = [folder / f"rank{i:03d}.log" for i in range(files)]
        for path in paths:
            path.write_text("".join(header))
        follower = Follower(folder, files, gpu, delay)
        try:
            if not follower.ready.wait(300):
                raise SystemExit(f"bench: the follower did not start on {files} files in 300 s")
            time.sleep(2.0)  # its first rounds, the watcher settling
            writer = subprocess.Popen(
                [sys.executable, "-c", WRITER, str(rate), str(seconds + 5), str(pool_log)]
                + [str(p) for p in paths],
                stdout=subprocess.PIPE,
                text=True,
            )
            time.sleep(3.0)
            cpu0, t0 = cpu_s(follower.proc.pid), time.monotonic()
            time.sleep(seconds)
            cpu1, t1 = cpu_s(follower.proc.pid), time.monotonic()
            while not follower.alerts.empty():  # what the mix itself raised
                follower.alerts.get()
            sent = time.monotonic()  # the writer goes on for about 2 s: under load
            with paths[0].open("a") as f:
                f.write(NAN)
            alert = wait_alert(follower, "nan-loss", 30.0, "999999")
            out, _ = writer.communicate(timeout=60)
            lines, wrote_s = out.split()
        finally:
            follower.stop()
    return {
        "cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
        "lines_per_s": int(lines) / float(wrote_s),
        "cpu_ms_per_line": 1000 * (cpu1 - cpu0) / ((t1 - t0) * int(lines) / float(wrote_s)),
        "alert_s": alert - sent,
    }


def wait_alert(follower: Follower, rule: str, timeout_s: float, text: str = "") -> float:
    """When the follower printed an alert of `rule` holding `text` (the probe came through)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = follower.alerts.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            break
        if (f'"rule": "{rule}"' in line or f'"rule":"{rule}"' in line) and text in line:
            return time.monotonic()
    raise SystemExit(f"bench: no {rule} alert within {timeout_s:g} s of the NaN line")


def burst(source: Path, gpu: str) -> tuple[float, float]:
    """Seconds for `logwatch tail` to catch up on `source` appended at once to a followed file,
    and seconds for `logwatch replay` to read the same file."""
    with tempfile.TemporaryDirectory(prefix="bench_tail_burst.") as tmp:
        folder = Path(tmp)
        target = folder / "train.log"
        target.write_bytes(b"")
        follower = Follower(folder, 1, gpu)
        try:
            if not follower.ready.wait(300):
                raise SystemExit("bench: the follower did not start in 300 s")
            time.sleep(2.0)
            end = b"2026-12-01 00:00:00,000 INFO [train] run start: run_id=probe pid=1 gpus=8\n"
            start = time.monotonic()
            with source.open("rb") as src, target.open("ab") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
                out.write(end + NAN.encode())
            caught = wait_alert(follower, "nan-loss", 3600.0, "999999")
        finally:
            follower.stop()
    logwatch = str(Path(sys.executable).with_name("logwatch"))
    replay_start = time.monotonic()
    subprocess.run(
        [logwatch, "replay", str(source), "--format", "jsonl"],
        stdout=subprocess.DEVNULL,
        check=False,
    )
    return caught - start, time.monotonic() - replay_start


def load(text: str) -> tuple[int, float]:
    """`8x10`: 8 files, 10 lines/s each."""
    files, _, rate = text.partition("x")
    try:
        return int(files), float(rate)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected FILESxRATE, e.g. 8x10") from None


def main() -> None:
    """Measure each load and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=load, action="append", help="FILESxRATE (repeatable)")
    parser.add_argument("--all", action="store_true", help="also 1x1, 8x1 and 1x10")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--gpu", choices=["off", "auto"], default="off")
    parser.add_argument("--burst-mb", type=int, default=0, help="catch-up of a burst (0: none)")
    parser.add_argument(
        "--max-batch-delay", action="append", help="tail's --max-batch-delay (repeatable)"
    )
    args = parser.parse_args()
    loads = args.load or [(8, 10.0), (200, 1.0)]
    if args.all:
        loads = [(1, 1.0), (8, 1.0), (1, 10.0), *loads]
    print(
        f"{platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()} · "
        f"{args.seconds:g} s per load · --gpu {args.gpu} · logwatch from "
        f"{Path(logwatch.__file__).parent}\n"
    )
    print(
        "| load | --max-batch-delay | lines/s written | tail CPU, % of one core | CPU ms per line "
        "| NaN line to alert, under the load | target |"
    )
    print("|---|---|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory(prefix="bench_tail_cpu_pool.") as tmp:
        pool_log = pool(Path(tmp))
        for (files, rate), delay in itertools.product(loads, args.max_batch_delay or [None]):
            r = measure(files, rate, args.seconds, args.gpu, pool_log, delay)
            target = TARGETS.get((files, int(rate)))
            verdict = (
                ""
                if target is None
                else f"<= {target:g} %: " + ("met" if r["cpu_pct"] <= target else "**not met**")
            )
            print(
                f"| {files} files x {rate:g} lines/s | {delay or 'default'} | {r['lines_per_s']:.1f} | {r['cpu_pct']:.1f} % | "
                f"{r['cpu_ms_per_line']:.2f} | {r['alert_s'] * 1000:.0f} ms | {verdict} |",
                flush=True,
            )
    if args.burst_mb:
        source = ensure_data("dflash", args.burst_mb)
        warm(source)
        tail_s, replay_s = burst(source, args.gpu)
        size = source.stat().st_size / 2**20
        ratio = replay_s / tail_s
        print(
            f"\ncatch-up of a {size:.0f} MiB burst into one file (`{source.name}`): "
            f"{size / tail_s:.0f} MiB/s ({tail_s:.1f} s to the alert on its last line); "
            f"`logwatch replay` of the same file {size / replay_s:.0f} MiB/s ({replay_s:.1f} s); "
            f"tail/replay throughput {ratio:.2f} (target >= 0.5: {'met' if ratio >= 0.5 else '**not met**'})"
        )


if __name__ == "__main__":
    main()
