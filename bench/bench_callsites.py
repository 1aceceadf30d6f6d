"""Where a replay's polars time goes, by the logwatch line that calls polars.

Usage: python bench/bench_callsites.py LOG [--rules PACK]... [--no-builtin-rules] [--top 40]

Replays LOG on one thread (no parse threads, no read-ahead thread) and, with `sys.setprofile`,
adds the CPU time (`time.process_time()`: every thread, polars' pool included) of each call
into polars' native code to the innermost logwatch frame that made it. `bench_stages.py`
times whole stages; this says which query inside a stage costs what, and how often it runs.
The profiler's hook runs on every C call, so the total runs 15-35 % above a plain replay's
(4.08 CPU s against 2.96-3.15 on the 100 MB slice of `bench/data/dflash8.log`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import logwatch.drivers.replay as replay_module
from logwatch import api


def _site(frame: FrameType | None) -> str:
    while frame is not None:
        name = frame.f_code.co_filename
        if "/logwatch/" in name:
            where = name.split("/logwatch/", 1)[1]
            return f"{where}:{frame.f_lineno} {frame.f_code.co_name}"
        frame = frame.f_back
    return "?"


def _is_polars(function: Any) -> bool:
    owner = getattr(function, "__self__", None)
    module = getattr(function, "__module__", None) or type(owner).__module__ or ""
    return module.startswith("polars") or type(owner).__name__.startswith("Py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--rules", action="append", default=[])
    parser.add_argument("--no-builtin-rules", action="store_true")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()

    seconds: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    open_calls: list[tuple[float, str] | None] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            open_calls.append((time.process_time(), _site(frame)) if _is_polars(arg) else None)
        elif event in ("c_return", "c_exception") and open_calls:
            started = open_calls.pop()
            if started is not None:
                seconds[started[1]] += time.process_time() - started[0]
                calls[started[1]] += 1

    replay_module._prefetch = lambda items, depth=1: items  # type: ignore[assignment]  # one thread
    rules = api.load_rules(args.rules, builtin=not args.no_builtin_rules)
    options = replay_module.ReplayOptions(workers=1, stats=False)
    start = time.process_time()
    sys.setprofile(profile)
    try:
        result = replay_module.replay([str(args.log)], rules, options=options)
    finally:
        sys.setprofile(None)
    total = time.process_time() - start
    print(
        f"{args.log.name}: {len(result.events)} events; CPU {total:.3f} s, "
        f"{sum(seconds.values()):.3f} s of it in polars calls"
    )
    print("\n| CPU s | calls | call site |\n|---:|---:|---|")
    for site, spent in seconds.most_common(args.top):
        print(f"| {spent:.3f} | {calls[site]} | `{site}` |")


if __name__ == "__main__":
    main()
