"""What the Prometheus exporter and the Alertmanager sink add to `logwatch tail`, against a tail
without them measured in the same run.

Usage: python bench/bench_alertmanager.py [--rounds 400] [--lines 20] [--files 50] [--idle-s 20]

(1) per batch: one TailDriver in this process over `--files` files (built-in rules); each round
    appends `--lines` step lines to one file and runs `poll_once`; every 20th round carries a NaN
    and the next its recovery (so the sink's emit, with its fsynced state file, is in the
    numbers). Baseline and "with" drivers alternate round by round on their own folders; the
    median and p90 wall time per round, in µs.
(1b) the same parts alone, as the median of many calls: the exporter's `observe` on one parsed
    batch of `--lines` lines (vs `parse_lines` on it, the work every batch pays anyway), and the
    sink's `emit` of one alert event (an fsynced state file write, plus waking the peer thread).
(2) idle CPU with `--files` quiet files: `logwatch tail` subprocesses, one plain, one with
    `--metrics` (scraped every 5 s) and `--alertmanager` (re-posting every resend interval, 1m
    default), CPU time over `--idle-s` from /proc, as a share of one core.

A real `prometheus-alertmanager` is started on loopback when installed; without it the sink
posts to a closed port (its retries are then part of the cost) and the report says so.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from logwatch.cluster_config import AlertmanagerConfig
from logwatch.drivers.fanout import FanOut
from logwatch.drivers.tail import TailDriver
from logwatch.drivers.tail_options import TailOptions
from logwatch.engine import Engine
from logwatch.metrics.exporter import MetricsExporter
from logwatch.rules.loader import builtin_rules_dir, load_rules
from logwatch.sinks.alertmanager.payload import Identity
from logwatch.sinks.alertmanager.sink import AlertmanagerSink
from logwatch.sinks.base import ListSink

ROOT = Path(__file__).resolve().parent.parent

STEP = (
    "2026-11-28 14:02:07,199 INFO [train] step {n}/200000 | loss 2.1182 | acc 0.242 | "
    "lr 2.40e-05 | grad_norm 1.23 | tok/s 48292 | q_hs=19 q_hsb=[1,2,2,6,3,5]\n"
)
NAN = "2026-11-28 14:02:08,000 INFO [train] step {n}/200000 | loss nan | grad_norm nan\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_alertmanager(folder: Path) -> tuple[subprocess.Popen[bytes] | None, str]:
    """A real Alertmanager on loopback (None and a closed port's URL when not installed)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    binary = shutil.which("prometheus-alertmanager")
    if binary is None:
        return None, url
    config = folder / "am.yml"
    config.write_text("route:\n  receiver: none\nreceivers:\n  - name: none\n", encoding="utf-8")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.path={folder / 'am'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "/-/ready", timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    return proc, url


def driver(folder: Path, files: int, *, am_url: str | None) -> tuple[TailDriver, list[Path]]:
    """A tail driver over `files` files; with the exporter and the sink when `am_url` is set."""
    folder.mkdir(parents=True)
    paths = [folder / f"rank{i:02d}.log" for i in range(files)]
    for path in paths:
        path.write_text(STEP.format(n=0), encoding="utf-8")
    sinks: list[object] = [ListSink()]
    plugins: list[MetricsExporter] = []
    if am_url is not None:
        am = AlertmanagerSink(
            AlertmanagerConfig(urls=(am_url,)),
            Identity(host="bench"),
            state_file=folder / "am.json",
            report=lambda _: None,
        )
        sinks.append(am)
        plugins.append(
            MetricsExporter(listen=f"127.0.0.1:{free_port()}", backlogs={"am": am.backlog})
        )
    engine = Engine(load_rules([builtin_rules_dir()]))
    tail = TailDriver(
        [str(folder / "*.log")],
        engine,
        FanOut(sinks),  # type: ignore[arg-type]  # ListSink and AlertmanagerSink are Sinks
        plugins=plugins,
        options=TailOptions(),
        watcher_factory=None,
        state_dir=folder / "state",
    )
    tail.open()
    return tail, paths


def per_batch(
    rounds: int, lines: int, files: int, am_url: str, work: Path
) -> dict[str, list[float]]:
    """µs per round for the plain driver and the one with exporter + sink, interleaved."""
    drivers = {
        "plain": driver(work / "plain", files, am_url=None),
        "with": driver(work / "with", files, am_url=am_url),
    }
    times: dict[str, list[float]] = {name: [] for name in drivers}
    step = 1
    for r in range(rounds):
        text = "".join(STEP.format(n=step + i) for i in range(lines))
        if r % 20 == 10:
            text += NAN.format(n=step + lines)
        step += lines + 1
        for name, (tail, paths) in drivers.items():
            with paths[r % len(paths)].open("a", encoding="utf-8") as out:
                out.write(text)
            start = time.perf_counter()
            while tail.poll_once():
                pass
            times[name].append((time.perf_counter() - start) * 1e6)
    for tail, _ in drivers.values():
        tail.close()
    return times


def parts(lines: int, am_url: str, work: Path, calls: int = 2000) -> dict[str, float]:
    """Median µs of one call: parse a batch, the exporter's observe of it, the sink's emit."""
    import polars as pl

    from logwatch.alerts import AlertEvent, Severity, Status
    from logwatch.parse import parse_lines

    text = pl.Series([STEP.format(n=i).rstrip("\n") for i in range(lines)])
    frame = parse_lines(text, source="rank00.log", first_line=1)
    exporter = MetricsExporter()
    sink = AlertmanagerSink(
        AlertmanagerConfig(urls=(am_url,)),
        Identity(host="bench"),
        state_file=work / "parts-am.json",
        report=lambda _: None,
    )

    def event(i: int) -> AlertEvent:
        status = Status.FIRING if i % 2 == 0 else Status.RESOLVED
        return AlertEvent(
            "nan-loss", Severity.CRITICAL, status, "rank00.log", i, None, i, None, "s"
        )

    def median_us(call: object, n: int) -> float:
        samples = []
        for i in range(n):
            start = time.perf_counter()
            call(i)  # type: ignore[operator]  # a one-argument callable
            samples.append((time.perf_counter() - start) * 1e6)
        return statistics.median(samples)

    out = {
        "parse": median_us(lambda i: parse_lines(text, source="rank00.log", first_line=1), calls),
        "observe": median_us(lambda i: exporter.observe(frame), calls),
        "emit": median_us(lambda i: sink.emit(event(i)), calls // 10),
    }
    sink.close()
    return out


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(files: int, seconds: float, am_url: str, work: Path) -> dict[str, float]:
    """Share of one core each `logwatch tail` uses on quiet files (both run at the same time)."""
    folder = work / "idle"
    folder.mkdir()
    for i in range(files):
        (folder / f"rank{i:02d}.log").write_text(STEP.format(n=0), encoding="utf-8")
    metrics = f"127.0.0.1:{free_port()}"
    base = [sys.executable, "-m", "logwatch", "tail", str(folder / "*.log"), "--gpu", "off"]
    procs = {
        "plain": subprocess.Popen(
            [*base, "--state-dir", str(work / "s1")],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        "with": subprocess.Popen(
            [
                *base,
                "--state-dir",
                str(work / "s2"),
                "--metrics",
                metrics,
                "--alertmanager",
                am_url,
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
    }
    time.sleep(8.0)  # started and caught up
    before = {name: cpu_s(p.pid) for name, p in procs.items()}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"http://{metrics}/metrics", timeout=2).read()
        time.sleep(5.0)
    out = {name: (cpu_s(p.pid) - before[name]) / seconds for name, p in procs.items()}
    for p in procs.values():
        p.terminate()
        p.wait(timeout=30)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--lines", type=int, default=20)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--idle-s", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        am, am_url = start_alertmanager(work)
        try:
            times = per_batch(args.rounds, args.lines, args.files, am_url, work)
            alone = parts(args.lines, am_url, work)
            idle = idle_cpu(args.files, args.idle_s, am_url, work)
        finally:
            if am is not None:
                am.terminate()
                am.wait(timeout=10)
    print(
        f"{time.strftime('%Y-%m-%d')} · {platform.machine()} · {os.cpu_count()} cores · Python {platform.python_version()}"
    )
    print(
        f"Alertmanager: {'real, on loopback' if am is not None else 'NOT INSTALLED: posts to a closed port'}"
    )
    print("| what | plain tail | with exporter + Alertmanager sink | ratio |")
    print("|---|---:|---:|---:|")
    for label, q in (("median", 0.5), ("p90", 0.9)):
        plain, with_ = (
            statistics.quantiles(times[n], n=10)[int(q * 10) - 1] for n in ("plain", "with")
        )
        print(
            f"| µs per round ({args.lines} lines, {args.files} files), {label} | {plain:.0f} | {with_:.0f} | {with_ / plain:.2f}x |"
        )
    print(
        f"| alone: parse_lines of one {args.lines}-line batch (paid anyway) | {alone['parse']:.0f} µs | | |"
    )
    print(
        f"| alone: exporter observe of that batch | | {alone['observe']:.0f} µs | {alone['observe'] / alone['parse']:.3f}x of parse |"
    )
    print(
        f"| alone: Alertmanager sink emit of one alert event (fsynced state) | | {alone['emit']:.0f} µs | |"
    )
    print(
        f"| idle CPU, {args.files} quiet files (scraped every 5 s) | {idle['plain']:.2%} | {idle['with']:.2%} | |"
    )


if __name__ == "__main__":
    main()
