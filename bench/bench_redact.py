"""Cost of secret masking per kB: long hyphenated lines (the quadratic case) and ordinary lines.

Times `redact()` on 16 / 64 / 256 kB hyphenated lines and on a batch of ordinary log lines, and
prints time per kB and the ratio of time per kB at 256 kB to that at 16 kB (1.0 = linear). The
baseline, measured in the same run, is the old `_KEYED` pattern (prefix matched by a backtracking
`(?:[a-z0-9]+[_-])*`) on the 16 kB line only, in a child process killed after `--timeout` s.
Usage: .venv/bin/python bench/bench_redact.py [--timeout 60]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from logwatch.redact import redact

OLD_KEYED = (
    r"""(?i)\b((?:[a-z0-9]+[_-])*(?:api[_-]?key|token|secret|password|passwd))\b"""
    r"""(['"]?\s*[=:]\s*['"]?)([^\s'",}]{8,})"""
)
ORDINARY = (
    "2026-11-28 14:09:05,117 INFO [train] step 1402/200000 | loss 2.3 | grad_norm 1.1 | "
    "lr 3.0e-04 | tokens/s 51234 | hf_token: hf_abcdefghijklmnopqrstuvwxyz0123456789"
)


def hyphenated(kb: int) -> str:
    """A line of `ab-ab-...` of about `kb` kB (hyphen-joined names, ids, paths)."""
    return ("ab-" * (kb * 1024 // 3 + 1))[: kb * 1024]


def seconds_per_kb(text: str, repeat: int) -> float:
    """Best-of-`repeat` time of redact(text), per kB of text."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        redact(text)
        best = min(best, time.perf_counter() - start)
    return best / (len(text) / 1024)


def old_pattern_s(kb: int, timeout_s: float) -> float | None:
    """Seconds the old pattern takes on a `kb` kB hyphenated line, None past the timeout."""
    code = (
        "import re, time\n"
        f"p = re.compile({OLD_KEYED!r})\n"
        f"line = ('ab-' * ({kb} * 1024 // 3 + 1))[: {kb} * 1024]\n"
        "t = time.perf_counter(); p.sub('', line); print(time.perf_counter() - t)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return None
    return float(done.stdout)


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    per_kb = {kb: seconds_per_kb(hyphenated(kb), 5) for kb in (16, 64, 256)}
    batch = "\n".join([ORDINARY] * 1000)
    ordinary = seconds_per_kb(batch, 5)
    old = old_pattern_s(16, args.timeout)
    print("| input | redact() per kB | vs 16 kB hyphenated |")
    print("|---|---:|---:|")
    for kb, value in per_kb.items():
        print(f"| {kb} kB hyphenated line | {value * 1e6:.1f} µs | {value / per_kb[16]:.2f} |")
    print(
        f"| ordinary log lines ({len(batch) // 1024} kB) | {ordinary * 1e6:.1f} µs | "
        f"{ordinary / per_kb[16]:.2f} |"
    )
    if old is None:
        print(f"| old pattern, 16 kB hyphenated line | > {args.timeout:g} s (killed) | |")
    else:
        ratio = old / 16 / per_kb[16]
        print(
            f"| old pattern, 16 kB hyphenated line | {old / 16 * 1e6:.0f} µs "
            f"({old:.2f} s in all) | {ratio:.0f} |"
        )


if __name__ == "__main__":
    main()
