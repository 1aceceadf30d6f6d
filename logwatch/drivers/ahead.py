"""Work ahead of the engine on threads: the next blocks read and parsed while the engine, which
must see them in order, works on this one (polars releases the GIL)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
U = TypeVar("U")


def ordered_map(
    fn: Callable[[T], U], items: Iterator[T], *, workers: int, depth: int = 2
) -> Iterator[U]:
    """`map(fn, items)` on `workers` threads, results in input order, `depth` items ahead.

    Parsing is polars work that releases the GIL: blocks parse in parallel on the machine's
    cores while the engine, which must see blocks in order, works on the current one.
    """
    if workers <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="logwatch-parse") as pool:
        pending: deque[Future[U]] = deque()
        try:
            try:
                for item in items:
                    pending.append(pool.submit(fn, item))
                    if len(pending) > depth:
                        yield pending.popleft().result()
            except Exception:
                # What was read before a read error still goes through, in order, first.
                while pending:
                    yield pending.popleft().result()
                raise
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def prefetch(items: Iterator[T], depth: int = 1) -> Iterator[T]:
    """Run a producer on a worker thread, `depth` items ahead of the consumer.

    Reading and parsing the next block overlaps with the engine's work on this one (polars
    releases the GIL), which keeps both cores of a small machine busy.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="logwatch-read") as pool:
        pending: deque[Future[T | None]] = deque()
        sentinel = None

        def step() -> T | None:
            return next(items, sentinel)

        for _ in range(depth):
            pending.append(pool.submit(step))
        while pending:
            item = pending.popleft().result()
            if item is None:
                break
            pending.append(pool.submit(step))
            yield item
        for future in pending:
            future.cancel()
