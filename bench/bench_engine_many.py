"""The engine's share of an in-process replay of many small files (issue 30's and 36's fixed
cost per source): CPU seconds in all and in the engine's calls, per file.

Usage: PYTHONPATH=TREE python bench/bench_engine_many.py DIR [--runs 2]

Replays every file under DIR (sorted) as `logwatch replay FILES --format jsonl` does, in this
process whatever the input's size (no `--jobs` processes), its output to /dev/null. The engine's
time is the CPU time inside its outermost `process`, `process_many`, `finish` and
`finish_many` calls (those the tree has), measured by wrapping them: run it with PYTHONPATH set
to another tree's root to time that tree's code with the same interpreter and the same input.
Prints one line per run: wall s, CPU s, engine CPU s, files, ms of CPU per file.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def _timed(engine_cls: type, spent: list[float]) -> None:
    """Wrap the engine's batch and end calls: CPU time of the outermost call goes to `spent`."""
    depth = [0]
    for name in ("process", "process_many", "finish", "finish_many"):
        method = getattr(engine_cls, name, None)
        if method is None:
            continue

        def wrapped(self: Any, *args: Any, _method: Callable[..., Any] = method, **kw: Any) -> Any:
            depth[0] += 1
            start = time.process_time()
            try:
                return _method(self, *args, **kw)
            finally:
                depth[0] -= 1
                if not depth[0]:
                    spent[0] += time.process_time() - start

        setattr(engine_cls, name, functools.wraps(method)(wrapped))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """stdout to /dev/null (the JSONL is not what is measured)."""
    saved = os.dup(1)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        try:
            yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    import logwatch.cli as cli
    import logwatch.cli.jobs as jobs
    from logwatch.engine import Engine

    jobs._default_jobs = lambda files, hooks: None  # in this process, whatever the size
    spent = [0.0]
    _timed(Engine, spent)
    paths = sorted(str(p) for p in args.folder.rglob("*") if p.is_file())
    print(f"# {cli.__file__}: {len(paths)} files", file=sys.stderr)
    for _ in range(args.runs):
        spent[0] = 0.0
        wall, cpu = time.perf_counter(), time.process_time()
        sys.argv = ["logwatch", "replay", *paths, "--format", "jsonl"]
        with _quiet(), contextlib.suppress(SystemExit):
            cli.main(sys.argv[1:])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(
            f"wall {wall:.2f} s | CPU {cpu:.2f} s | engine CPU {spent[0]:.2f} s | "
            f"{len(paths)} files | {1000 * cpu / len(paths):.2f} ms CPU per file, "
            f"{1000 * spent[0] / len(paths):.2f} ms engine",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
