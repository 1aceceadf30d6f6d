"""A log writer that rotates fast: Python's RotatingFileHandler writing numbered lines at a rate.

Run as `python -m logwatch.testing.rotating PATH --rate 2500 --seconds 2` (the rotation tests and
bench/bench_rotation.py); each line carries `seq=N`, N from 1, so a reader can count what it saw.
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import time

EACH_LINE_PACK = """
[[rule]]
id = "each-line"
type = "match"
severity = "info"
pattern = 'step seq=(?P<seq>\\d+)'
summary = "{text}"
"""
"""A rule pack that fires once per written line (its `seq` is the label), so a follower's output
says which lines it read (the rotation tests and bench/bench_rotation.py)."""

PAD = "x" * 48
"""Makes a line about 80 bytes, like a short training-log line: 10 KiB holds ~128 of them."""


def write(path: str, rate: float, seconds: float, max_bytes: int, backups: int) -> int:
    """Write `rate * seconds` numbered lines through a RotatingFileHandler; how many."""
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
    )
    handler.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger("rotating-writer")
    log.propagate = False
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    total = int(rate * seconds)
    start = time.monotonic()
    for n in range(1, total + 1):
        log.info("step seq=%d %s", n, PAD)
        ahead = start + n / rate - time.monotonic()
        if ahead > 0.001:  # pace in ms slices: sleeping per line would undershoot the rate
            time.sleep(ahead)
    handler.close()
    return total


def main() -> None:
    """Command line: PATH --rate --seconds --max-bytes --backups."""
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--rate", type=float, default=2500.0)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--max-bytes", type=int, default=10 * 1024)
    parser.add_argument("--backups", type=int, default=5)
    args = parser.parse_args()
    write(args.path, args.rate, args.seconds, args.max_bytes, args.backups)


if __name__ == "__main__":
    main()
