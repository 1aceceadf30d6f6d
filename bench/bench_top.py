"""`logwatch top` at rest against `logwatch tail` at rest, measured in the same run on the same
files: the CPU the view adds while 50 followed files stay quiet.

Usage: python bench/bench_top.py [--files 50] [--quiet-s 20] [--settle-s 5]  (about 4 min)

Each follower is a subprocess: `tail` with stdout on a pipe, `top` full-screen on a pseudo-
terminal of 80x24 (its output drained), and `top` piped (a status line per source per second).
CPU is the process's user+system time (all threads, /proc) over `--quiet-s`, twice: after
`--settle-s` of catch-up (ages in seconds: the view redraws each second) and from 65 s on (ages
in whole minutes: it redraws once a minute); the number is % of one core.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import platform
import pty
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEP = (
    "2026-11-28 14:02:07,199 INFO [train] step {n}/200000 | loss 2.1182 | acc 0.242 | "
    "lr 2.40e-05 | grad_norm 1.23 | tok/s 48292 | q_hs=19 q_hsb=[1,2,2,6,3,5]\n"
)


KINDS = ("tail", "top-tty", "top-piped")


def cpu_s(pid: int) -> float:
    """User + system seconds of a process, all threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drain(fd: int) -> None:
    """Read a pty master until it closes (the view's frames go nowhere)."""
    while True:
        try:
            if not os.read(fd, 65536):
                return
        except OSError:
            return


def start(kind: str, folder: Path) -> tuple[subprocess.Popen[bytes], int | None]:
    """One follower; for `top-tty` also its pty master."""
    pattern = str(folder / "logs" / "*.log")
    command = "tail" if kind == "tail" else "top"
    state = folder / f"state-{kind}"
    args = [sys.executable, "-m", "logwatch", command, pattern, "--state-dir", str(state)]
    args += ["--gpu", "off"]
    if kind != "top-tty":
        proc = subprocess.Popen(
            args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        return proc, None
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        stdin=slave,
        stdout=slave,
        stderr=subprocess.DEVNULL,
        env={**env, "TERM": "xterm-256color"},
        start_new_session=True,
    )
    os.close(slave)
    threading.Thread(target=drain, args=(master,), daemon=True).start()
    return proc, master


def measure(kind: str, folder: Path, windows: list[tuple[float, float]]) -> list[float]:
    """% of one core while nothing is written, for each (start, end) window in seconds since
    the follower started."""
    proc, master = start(kind, folder)
    t_start = time.monotonic()
    out = []
    try:
        for begin, end in windows:
            time.sleep(max(0.0, t_start + begin - time.monotonic()))
            before, t0 = cpu_s(proc.pid), time.monotonic()
            time.sleep(max(0.0, t_start + end - time.monotonic()))
            out.append((cpu_s(proc.pid) - before) / (time.monotonic() - t0) * 100)
    finally:
        proc.terminate()
        proc.wait(30)
        if master is not None:
            os.close(master)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--quiet-s", type=float, default=20.0)
    parser.add_argument("--settle-s", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "logs").mkdir()
        for i in range(args.files):
            text = "".join(STEP.format(n=n) for n in range(100))
            (folder / "logs" / f"run{i:02d}.log").write_text(
                f"2026-11-28 14:02:03,118 INFO [train] run start: run_id=r{i:02d}\n" + text
            )
        print(
            f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores"
        )
        early = (args.settle_s, args.settle_s + args.quiet_s)
        rest = (65.0, 65.0 + args.quiet_s)  # ages past a minute: the view changes once a minute
        print(f"{args.files} quiet files; windows {early} and {rest} s after start")
        results = {kind: measure(kind, folder, [early, rest]) for kind in KINDS}
        for window, name in enumerate(("first minute", "at rest")):
            base = results["tail"][window]
            print(f"-- {name}")
            for kind in KINDS:
                value = results[kind][window]
                ratio = f" ({value / base:.1f}x tail)" if base > 0 and kind != "tail" else ""
                print(f"{kind:10s} {value:6.2f} % of one core{ratio}")


if __name__ == "__main__":
    main()
