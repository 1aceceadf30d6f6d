"""How `logwatch tail` follows files (`TailOptions`, its `StartMode`) and how it says what it
does (`Status`): what `drivers.tail` is built from, apart from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from logwatch.sources.follow import FollowOptions

Status = Callable[[str], None]


class StartMode(StrEnum):
    """What `tail` does with the history of files that exist at start (no checkpoint)."""

    CATCH_UP = "catch-up"  # run it silently, emit what still fires at its end
    BEGINNING = "beginning"  # emit every alert of it
    END = "end"  # skip it


@dataclass(frozen=True, slots=True)
class TailOptions:
    """How `logwatch tail` follows files.

    `start` applies to files that exist at start-up when there is no checkpoint: `catch-up` runs
    their history silently and emits the alerts still firing at its end, `beginning` emits every
    alert of the history, `end` skips the history."""

    start: StartMode = StartMode.CATCH_UP
    poll_interval_s: float = 1.0
    rotate_wait_s: float = 5.0
    checkpoint_interval_s: float = 1.0
    # While lines keep arriving, rounds wait up to this long to read them in larger batches
    # (`drivers.tail_pace`: 1 s while rounds are cheap, longer only for costly ones); 0: a
    # round for every file event.
    max_batch_delay_s: float = 5.0
    follow: FollowOptions = field(default_factory=FollowOptions)
    warm_up: bool = True  # run the rules once over typical lines at start (`drivers.warmup`)
    layout: str | None = None  # `--layout`: rank and host from paths no built-in layout knows
    gpus_per_node: int | None = None  # `--gpus-per-node`: a local rank and its node's index
    # `--watcher`: what hears file events (`sources.inotify.WATCHERS`); auto: inotify on Linux
    watcher: str = "auto"

    def __post_init__(self) -> None:
        if not self.max_batch_delay_s >= 0:
            raise ValueError(f"max batch delay must be 0s or more, not {self.max_batch_delay_s}")
        if self.start not in set(StartMode):
            raise ValueError(
                f"unknown start mode {self.start!r} (expected one of: {', '.join(StartMode)})"
            )
