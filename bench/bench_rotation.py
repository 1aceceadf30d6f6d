"""Lines kept under fast rotation (issue 13): `logwatch tail` against GNU `tail -F`, same writer.

Usage: python bench/bench_rotation.py [--rates 1000,2500,5000,10000] [--seconds 2]

For each rate, a writer subprocess (logwatch.testing.rotating: Python's RotatingFileHandler,
10 KiB files, 5 backups, ~80-byte numbered lines) runs while a follower subprocess reads; the
figure is the fraction of the numbered lines the follower printed (unique). Followers: logwatch
on `train.log` and on `train.log*` (a match rule alerting on every line, jsonl), and the
baseline `tail -q -n +1 -F train.log` measured in the same run.
"""

from __future__ import annotations

import argparse
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from logwatch.testing.rotating import EACH_LINE_PACK

ROOT = Path(__file__).resolve().parent.parent
_SEQ = re.compile(rb"seq=(\d+)")


def logwatch_cmd(folder: Path, pattern: str) -> list[str]:
    """`logwatch tail` with one alert per numbered line."""
    (folder / "pack.toml").write_text(EACH_LINE_PACK, encoding="utf-8")
    return [
        *(sys.executable, "-m", "logwatch", "tail", str(folder / pattern), "--format", "jsonl"),
        *("--no-builtin-rules", "--gpu", "off", "--rules", str(folder / "pack.toml")),
        *("--state-dir", str(folder / "state")),
    ]


def kept(follower: list[str], rate: int, seconds: float) -> float:
    """Fraction of the writer's numbered lines that `follower` printed."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cmd = [arg.replace("{DIR}", tmp) for arg in follower]
        if cmd[0] == "logwatch":
            cmd = logwatch_cmd(folder, cmd[1])
        out_path = folder / "out"
        # The file exists before the follower starts: GNU tail -F started on a missing name
        # polls it and keeps ~5% of the lines, which would make a poor baseline.
        (folder / "train.log").write_bytes(b"")
        with open(out_path, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.DEVNULL)
            time.sleep(1.5)  # started and watching
            writer = [sys.executable, "-m", "logwatch.testing.rotating", str(folder / "train.log")]
            subprocess.run([*writer, "--rate", str(rate), "--seconds", str(seconds)], check=True)
            drain(out_path)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        seen = {int(m.group(1)) for m in _SEQ.finditer(out_path.read_bytes())}
        return len(seen) / int(rate * seconds)


def drain(out_path: Path, quiet_s: float = 5.0, limit_s: float = 120.0) -> None:
    """Wait until the follower's output stopped growing for `quiet_s` (its backlog is done)."""
    deadline, size, since = time.monotonic() + limit_s, -1, time.monotonic()
    while time.monotonic() < deadline:
        now_size = out_path.stat().st_size
        if now_size != size:
            size, since = now_size, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.1)


def main() -> None:
    """Print a Markdown table: kept fraction per rate and follower."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rates", default="1000,2500,5000,10000")
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    followers = {"logwatch train.log": ["logwatch", "train.log"]}
    followers["logwatch 'train.log*'"] = ["logwatch", "train.log*"]
    if shutil.which("tail"):
        followers["tail -F train.log (baseline)"] = [
            "tail",
            "-q",
            "-n",
            "+1",
            "-F",
            "{DIR}/train.log",
        ]
    print(f"{platform.machine()} · Python {platform.python_version()} · {args.seconds:g} s per run")
    print("| lines/s | " + " | ".join(followers) + " |")
    print("|---:|" + "---:|" * len(followers))
    for rate in (int(r) for r in args.rates.split(",")):
        cells = [f"{kept(cmd, rate, args.seconds):.1%}" for cmd in followers.values()]
        print(f"| {rate} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
