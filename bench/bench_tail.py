"""`logwatch tail` speed, against `tail -F | grep` measured in the same run, on the same files.

Usage: python bench/bench_tail.py [--files 50] [--samples 300] [--quiet-s 20] [--rate 200000]
                                  [--seconds 20] [--sparse-runs 4] [--sparse-appends 20]
                                  [--only sparse|idle]

(1) latency: 50 files followed; a probe line is appended to a random one; the time from its
    write() to its alert on the follower's stdout (p50 / p99).
(1b) sparse: the same 50 files; a step line then a NaN line appended to a random one at
    jittered intervals of about 0.35 s, 4 runs x 20 (p50 / p99 / max): the stalls (1) cannot
    see, as it writes a continuous stream. Twice: the NaN line a DFlash step line (a line
    shape: the alert is nan-loss's), then the same line with a probe suffix (no shape fits it).
(2) idle CPU: the follower's CPU time (all threads, /proc) while the 50 files stay quiet.
(3) throughput: one file appended at --rate lines/s for --seconds, a probe every 0.5 s; the lag
    of each probe (first third vs last third: does it grow?), and peak RSS.
Each follower runs as a subprocess: logwatch with the built-in rules plus a probe rule, and the
baseline `tail -q -n0 -F FILES | grep --line-buffered ALERT`.
"""

from __future__ import annotations

import argparse
import os
import platform
import queue
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACK = """
[[rule]]
id = "probe"
type = "match"
severity = "info"
pattern = 'ALERT id=(?P<id>\\d+)'
summary = "probe {text}"
"""
STEP = (
    "2026-11-28 14:02:07,199 INFO [train] step {n}/200000 | loss 2.1182 | acc 0.242 | "
    "lr 2.40e-05 | grad_norm 1.23 | tok/s 48292 | q_hs=19 q_hsb=[1,2,2,6,3,5]\n"
)
_ID = re.compile(r"ALERT id=(\d+)")
# A DFlash NaN line whose step is the probe id: on the baseline's stdout, and in the text of
# logwatch's nan-loss alert.
_NAN_STEP = re.compile(r"step (\d+)/200000 \| loss nan")


HUNG_STOPS: list[object] = []
"""Followers that did not exit within 30 s of SIGTERM (said at the end)."""


class Follower:
    """A follower subprocess whose stdout lines are timestamped as they arrive."""

    def __init__(self, cmd: list[str] | str, *, shell: bool = False) -> None:
        self.proc = subprocess.Popen(
            cmd,
            shell=shell,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stop() ends a pipeline's every part
        )
        self.arrivals: queue.Queue[tuple[int, float]] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            now = time.perf_counter()
            line = raw.decode("utf-8", "replace")
            match = _ID.search(line) or _NAN_STEP.search(line)
            if match:
                self.arrivals.put((int(match.group(1)), now))

    def wait_for(self, probe: int, timeout_s: float = 30.0) -> float:
        """Arrival time of one probe's output line."""
        deadline = time.monotonic() + timeout_s
        while True:
            got, at = self.arrivals.get(timeout=max(deadline - time.monotonic(), 0.001))
            if got == probe:
                return at

    def cpu_s(self) -> float:
        """CPU seconds used so far by this process (all threads)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_bytes(self) -> int:
        """Resident set size now."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self) -> None:
        """Terminate (the whole process group: `tail | grep` is two processes) and reap; one
        that has not exited 30 s after SIGTERM is counted (`HUNG_STOPS`) and killed."""
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            HUNG_STOPS.append(self.proc.args)
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


def logwatch(folder: Path, state: Path) -> Follower:
    """`logwatch tail` on folder/*.log with the built-in rules and the probe rule."""
    pack = folder / "probe.toml"
    pack.write_text(PACK, encoding="utf-8")
    cmd = [sys.executable, "-m", "logwatch.cli", "tail", str(folder / "*.log"), "--from-end"]
    cmd += ["--format", "jsonl", "--rules", str(pack), "--state-dir", str(state)]
    return Follower(cmd)


def baseline(files: list[Path]) -> Follower:
    """`tail -F | grep`: follows and filters, nothing else."""
    names = " ".join(str(f) for f in files)
    grep = "grep --line-buffered -e ALERT -e 'loss nan'"
    return Follower(f"exec tail -q -n0 -F {names} | {grep}", shell=True)


def warm_up(follower: Follower, files: list[Path], first_id: int) -> int:
    """Probe until the follower answers (it has started and scanned its files)."""
    probe = first_id
    while True:
        with open(files[0], "ab") as out:
            out.write(f"ALERT id={probe}\n".encode())
        try:
            follower.wait_for(probe, timeout_s=2.0)
            return probe + 1
        except queue.Empty:
            probe += 1


def latency(follower: Follower, files: list[Path], samples: int, first_id: int) -> list[float]:
    """write()-to-stdout seconds of `samples` probes to random files."""
    rng = random.Random(7)
    fds = [os.open(f, os.O_WRONLY | os.O_APPEND) for f in files]
    out = []
    try:
        for probe in range(first_id, first_id + samples):
            line = STEP.format(n=probe).replace("\n", f" ALERT id={probe}\n").encode()
            start = time.perf_counter()
            os.write(rng.choice(fds), line)
            out.append(follower.wait_for(probe) - start)
            time.sleep(rng.uniform(0.01, 0.03))
    finally:
        for fd in fds:
            os.close(fd)
    return out


NAN = STEP.replace("loss 2.1182", "loss nan")


def sparse(
    follower: Follower, files: list[Path], appends: int, first_id: int, seed: int, shaped: bool
) -> list[float]:
    """write()-to-stdout seconds of NaN lines appended one at a time, each after an ordinary
    step line, to a random file, at jittered intervals of about 0.35 s (a training run's rhythm:
    the follower is idle between appends, so stalls on its round path show). `shaped`: the NaN
    line is a DFlash step line (its step is the probe id; the alert is nan-loss's), else the
    same line with a probe suffix, which no line shape fits (the general parse path, as for a
    trainer without a shape)."""
    rng = random.Random(seed)
    out = []
    for probe in range(first_id, first_id + appends):
        time.sleep(rng.uniform(0.2, 0.5))
        fd = os.open(rng.choice(files), os.O_WRONLY | os.O_APPEND)
        nan = NAN.format(n=probe)
        try:
            os.write(fd, STEP.format(n=probe).encode())
            time.sleep(rng.uniform(0.0, 0.03))
            start = time.perf_counter()
            os.write(fd, (nan if shaped else nan.replace("\n", f" ALERT id={probe}\n")).encode())
        finally:
            os.close(fd)
        out.append(follower.wait_for(probe) - start)
    return out


def sparse_rows(folder: Path, files: list[Path], state: Path, runs: int, appends: int) -> None:
    """Print p50 / p99 / max of the sparse appends, baseline and logwatch, `runs` runs each,
    for a DFlash NaN line and for a NaN line of no known shape."""
    print(f"\n(1b) sparse: {len(files)} files, {runs} runs x {appends} jittered NaN appends")
    print("| follower | NaN line | p50 | p99 | max | appends over 100 ms |")
    print("|---|---|---|---|---|---|")
    for shaped in (True, False):
        kind = "DFlash step line" if shaped else "no known shape"
        for name in ("tail -F | grep", "logwatch tail"):
            lat: list[float] = []
            for run in range(runs):
                tail = name.startswith("tail")
                follower = baseline(files) if tail else logwatch(folder, state)
                try:
                    first = warm_up(follower, files, 1_000_000 * (run + 1 + 10 * shaped))
                    lat += sparse(follower, files, appends, first, seed=run, shaped=shaped)
                finally:
                    follower.stop()
            slow = sum(1 for v in lat if v > 0.1)
            print(
                f"| {name.replace('|', chr(92) + '|')} | {kind} | {pct(lat, 50) * 1e3:.1f} ms | "
                f"{pct(lat, 99) * 1e3:.1f} ms | {max(lat) * 1e3:.1f} ms | {slow} of {len(lat)} |"
            )


def idle_cpu(follower: Follower, seconds: float) -> float:
    """Share of one core the follower uses while nothing is written."""
    time.sleep(1.0)
    before = follower.cpu_s()
    time.sleep(seconds)
    return (follower.cpu_s() - before) / seconds


def flood(
    follower: Follower, file: Path, rate: int, seconds: float
) -> tuple[list[float], int, float, float]:
    """Append `rate` lines/s for `seconds` with a probe every 0.5 s; (probe lags, peak RSS,
    lines/s actually written, seconds to drain after the writer stops)."""
    block = "".join(STEP.format(n=i) for i in range(rate // 100)).encode()
    fd = os.open(file, os.O_WRONLY | os.O_APPEND)
    sent: dict[int, float] = {}
    peak, written, probe = 0, 0, 10_000_000
    start = time.perf_counter()
    next_probe = start + 0.5
    try:
        while (now := time.perf_counter()) - start < seconds:
            while written < rate * (now - start):
                os.write(fd, block)
                written += rate // 100
            if now >= next_probe:
                sent[probe] = time.perf_counter()
                os.write(fd, f"ALERT id={probe}\n".encode())
                probe, next_probe = probe + 1, next_probe + 0.5
                peak = max(peak, follower.rss_bytes())
            time.sleep(0.005)
        elapsed = time.perf_counter() - start
        sent[probe] = time.perf_counter()  # the last probe: how long the backlog takes to drain
        os.write(fd, f"ALERT id={probe}\n".encode())
    finally:
        os.close(fd)
    arrived = {p: follower.wait_for(p, timeout_s=120) for p in sorted(sent)}
    lags = [arrived[p] - sent[p] for p in sorted(sent)]
    return lags[:-1], max(peak, follower.rss_bytes()), written / elapsed, lags[-1]


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> None:
    """Run the three measurements and print a markdown summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--quiet-s", type=float, default=20.0)
    parser.add_argument("--rate", type=int, default=200_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--sparse-runs", type=int, default=4)
    parser.add_argument("--sparse-appends", type=int, default=20)
    parser.add_argument(
        "--only", choices=["sparse", "idle"], help="run only (1b) sparse, or only (2) idle CPU"
    )
    args = parser.parse_args()
    try:
        _main(args)
    finally:
        if HUNG_STOPS:
            print(f"\n{len(HUNG_STOPS)} followers did not exit within 30 s of SIGTERM (killed)")


def _main(args: argparse.Namespace) -> None:
    print(f"# {platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "runs"
        folder.mkdir()
        files = [folder / f"run{i:02d}.log" for i in range(args.files)]
        for f in files:
            f.write_bytes(STEP.format(n=0).encode() * 10)
        if args.only == "sparse":
            sparse_rows(folder, files, Path(tmp) / "state", args.sparse_runs, args.sparse_appends)
            return
        if args.only == "idle":
            follower = logwatch(folder, Path(tmp) / "state")
            try:
                warm_up(follower, files, 1)
                print(f"idle CPU: {idle_cpu(follower, args.quiet_s) * 100:.2f} % of one core")
            finally:
                follower.stop()
            return
        rows = []
        for name, start in (("tail -F | grep", baseline), ("logwatch tail", None)):
            follower = start(files) if start else logwatch(folder, Path(tmp) / "state")
            try:
                first = warm_up(follower, files, 1)
                lat = latency(follower, files, args.samples, first)
                cpu = idle_cpu(follower, args.quiet_s)
            finally:
                follower.stop()
            rows.append((name, pct(lat, 50), pct(lat, 99), cpu))
        print(f"\n(1)+(2) {args.files} files, {args.samples} probes, {args.quiet_s:g} s quiet")
        print("| follower | p50 | p99 | idle CPU (one core) |\n|---|---|---|---|")
        for name, p50, p99, cpu in rows:
            print(
                f"| {name.replace('|', chr(92) + '|')} | {p50 * 1e3:.1f} ms | {p99 * 1e3:.1f} ms | {cpu * 100:.2f} % |"
            )
        base, lw = rows
        print(f"ratio logwatch / baseline: p50 {lw[1] / base[1]:.1f}x, p99 {lw[2] / base[2]:.1f}x")
        sparse_rows(folder, files, Path(tmp) / "state", args.sparse_runs, args.sparse_appends)

        for name in ("tail -F | grep", "logwatch tail"):
            flood_dir = Path(tmp) / f"flood-{name[:4]}"
            flood_dir.mkdir()
            file = flood_dir / "train.log"
            file.write_bytes(b"")
            follower = (
                baseline([file])
                if name.startswith("tail")
                else logwatch(flood_dir, Path(tmp) / "state-flood")
            )
            try:
                warm_up(follower, [file], 1)
                lags, rss, rate, drain = flood(follower, file, args.rate, args.seconds)
            finally:
                follower.stop()
            third = max(len(lags) // 3, 1)
            early, late = statistics.median(lags[:third]), statistics.median(lags[-third:])
            print(
                f"\n(3) {name}: {rate:,.0f} lines/s written for {args.seconds:g} s; probe lag "
                f"median first third {early * 1e3:.0f} ms, last third {late * 1e3:.0f} ms, "
                f"max {max(lags) * 1e3:.0f} ms; last line alerted {drain * 1e3:.0f} ms after the "
                f"writer stopped; peak RSS {rss / 2**20:.0f} MB"
            )


if __name__ == "__main__":
    main()
