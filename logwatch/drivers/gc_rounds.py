"""Garbage collection between tail rounds, not inside them.

CPython collects when allocations pass a threshold, wherever that happens: a young pass
(0.1-0.4 ms) lands in a few rounds in a hundred, a middle one (1-2 ms) now and then, and a full
one, which scans the ~40,000 objects of start-up (polars, the rules), takes 15-25 ms on this
2-core VM: in the round it lands in, between a line and its alert. While `TailDriver.run` loops,
automatic collection is off and the driver collects after each round instead, what the
automatic collector would have by then: the same schedule, moved out of the alert path. The
objects of start-up (imports, rules, the caught-up history) are frozen first (`gc.freeze`), so
a full collection scans only what came later."""

from __future__ import annotations

import gc
from types import TracebackType


class RoundCollector:
    """Inside `with`, automatic collection is off and `between_rounds()` collects; a process
    that had it off already (its owner manages collection) is left as it is."""

    def __init__(self) -> None:
        self._managed = self._froze = False

    def __enter__(self) -> RoundCollector:
        self._managed = gc.isenabled()
        if self._managed:
            gc.collect()
            self._froze = not gc.get_freeze_count()  # else the process froze its own already
            if self._froze:
                gc.freeze()
            gc.disable()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._managed:
            self._managed = False
            if self._froze:
                gc.unfreeze()  # back to the oldest generation: collected once garbage
            gc.enable()

    def between_rounds(self) -> None:
        """Collect the generations the automatic collector would have collected by now."""
        if not self._managed:
            return
        generation = due_generation(gc.get_count(), gc.get_threshold())
        if generation is not None:
            gc.collect(generation)


def due_generation(counts: tuple[int, int, int], thresholds: tuple[int, int, int]) -> int | None:
    """The generation CPython's collector would collect at these counts (`gc.get_count()`:
    allocations less deallocations since the last young pass, young passes since the last
    middle one, middle passes since the last full one), or None when none is due: the oldest
    whose count is over its threshold, once the young count is (a young threshold of 0 turns
    automatic collection off). The full pass skips CPython's heuristic of waiting until a
    quarter of the long-lived objects are new: start-up's objects are frozen, so it is small."""
    if thresholds[0] == 0 or counts[0] <= thresholds[0]:
        return None
    for generation in (2, 1):
        if counts[generation] > thresholds[generation]:
            return generation
    return 0
