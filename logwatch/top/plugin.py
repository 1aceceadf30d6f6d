"""What `logwatch top` shows, folded as the tail driver runs: a `TailPlugin` that keeps per-source
facts from every parsed batch (vectorized, a few rows per batch), and a `Sink` that keeps the
alert events. Both hand the view frozen snapshots; `changed` wakes the view."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

import polars as pl

from logwatch.alerts import FIRING, AlertEvent
from logwatch.drivers.plugins import DriverView, Plugin
from logwatch.engine import run_id
from logwatch.engine.lifecycle import moved_source

LOSS_POINTS = 40
"""Losses kept per source for the sparkline."""
RATE_POINTS = 64
RATE_WINDOW_S = 120.0
"""Steps/s is measured over the last two minutes of (log or arrival) time."""
RECENT_EVENTS = 50

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SourceRow:
    """One source as the view shows it."""

    source: str
    run: str | None
    step: int | None
    steps_per_s: float | None
    last_line_s: float | None  # wall-clock time.time() of the last line that arrived
    stalled: bool
    losses: tuple[float, ...]
    grad_norm: float | None
    lr: float | None
    throughput: tuple[float, ...]
    q_hs: int | None
    q_hsb: tuple[int, ...]
    alerts: tuple[AlertEvent, ...]


@dataclass(slots=True)
class _Facts:
    """Mutable per-source facts, only touched under the plugin's lock."""

    step: int | None = None
    points: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=RATE_POINTS))
    last_line_s: float | None = None
    losses: deque[float] = field(default_factory=lambda: deque(maxlen=LOSS_POINTS))
    grad_norm: float | None = None
    lr: float | None = None
    throughput: deque[float] = field(default_factory=lambda: deque(maxlen=LOSS_POINTS))
    q_hs: int | None = None
    q_hsb: tuple[int, ...] = ()


def _last(name: str) -> pl.Expr:
    return pl.col(name).drop_nulls().last().alias(name)


class TopPlugin(Plugin):
    """Folds each source's run facts for the view; also the sink of alert events (`emit`)."""

    name = "top"

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self.now = now
        self.changed = threading.Event()
        self._lock = threading.Lock()
        self._facts: dict[str, _Facts] = {}
        self._runs: dict[str, str | None] = {}
        self._steps: dict[str, int | None] = {}  # the engine's, kept in the checkpoint
        self._stalled: set[str] = set()
        self._firing: dict[str, AlertEvent] = {}
        self._recent: deque[tuple[float, AlertEvent]] = deque(maxlen=RECENT_EVENTS)
        self._seeded = False

    # --- the driver's side (its thread) ----------------------------------------------------

    columns: frozenset[str] | None = frozenset(
        {"source", "line", "ts", "text", "run_start", "step", "loss", "grad_norm", "lr"}
        | {"q_hs", "q_hsb", "throughput"}
    )

    def observe(self, frame: pl.DataFrame) -> None:
        """Fold parsed lines (one source's or many's), each source's batch in turn."""
        if frame.is_empty():
            return
        one = frame.get_column("source").n_unique() == 1
        for part in [frame] if one else frame.partition_by("source", maintain_order=True):
            self._fold(part)

    def _fold(self, frame: pl.DataFrame) -> None:
        """Fold one source's batch: a handful of aggregates and the tail of the loss series."""
        source = frame.get_column("source")[0]
        starts = frame.filter(pl.col("run_start").fill_null(False))
        if not starts.is_empty():  # a new run: what the old one said is over
            frame = frame.filter(pl.col("line") >= starts.get_column("line")[-1])
        agg = frame.select(
            _last("step"), _last("grad_norm"), _last("lr"), _last("q_hs"), _last("q_hsb")
        ).row(0, named=True)
        losses = frame.get_column("loss").drop_nulls().tail(LOSS_POINTS).to_list()
        tput = frame.get_column("throughput").drop_nulls().tail(LOSS_POINTS).to_list()
        points = self._points(frame)
        now = self.now()
        with self._lock:
            if not starts.is_empty():
                self._runs[source] = run_id(starts.get_column("text")[-1])
            facts = _Facts() if not starts.is_empty() else self._facts.get(source, _Facts())
            self._facts[source] = facts
            facts.last_line_s = now
            facts.losses.extend(losses)
            facts.throughput.extend(tput)
            facts.points.extend(points if points else self._arrival_point(agg["step"], now))
            facts.step = agg["step"] if agg["step"] is not None else facts.step
            facts.grad_norm = _or(agg["grad_norm"], facts.grad_norm)
            facts.lr = _or(agg["lr"], facts.lr)
            facts.q_hs = _or(agg["q_hs"], facts.q_hs)
            if agg["q_hsb"] is not None:
                facts.q_hsb = tuple(agg["q_hsb"])
        self.changed.set()

    @staticmethod
    def _points(frame: pl.DataFrame) -> list[tuple[float, int]]:
        """(log time in s, step) for the batch's last steps that have a timestamp."""
        timed = frame.filter(pl.col("step").is_not_null() & pl.col("ts").is_not_null())
        timed = timed.tail(RATE_POINTS).select(pl.col("ts").dt.epoch("ms") / 1000.0, "step")
        return [(float(t), int(s)) for t, s in timed.iter_rows()]

    @staticmethod
    def _arrival_point(step: int | None, now: float) -> list[tuple[float, int]]:
        return [] if step is None else [(now, step)]

    def round(self, driver: DriverView) -> Sequence[AlertEvent]:
        """Take the run ids and stall states the engine knows; no alerts of its own."""
        if not self._seeded:  # what a resumed checkpoint left firing was never emitted again
            self._seeded = True
            self._seed(driver.engine.active_alerts())
        states = list(driver.engine.sources.items())
        runs = {source: state.run_id for source, state in states}
        steps = {source: state.last_step for source, state in states}
        stalled = {source for source, since in driver.stall_states().items() if since is not None}
        with self._lock:
            runs = {**self._runs, **runs}  # the engine's (checkpointed) word wins
            if (runs, steps, stalled) != (self._runs, self._steps, self._stalled):
                self._runs, self._steps, self._stalled = runs, steps, stalled
                self.changed.set()
        return []

    def _seed(self, firing: Sequence[AlertEvent]) -> None:
        with self._lock:
            for event in firing:
                self._firing.setdefault(event.fingerprint, event)
        self.changed.set()

    # --- the sink's side ---------------------------------------------------------------------

    def emit(self, event: AlertEvent) -> None:
        """Keep the event: in the recent log, and as firing until it resolves."""
        with self._lock:
            self._recent.append((self.now(), event))
            if event.status == FIRING:
                self._firing[event.fingerprint] = event
            else:
                self._firing.pop(event.fingerprint, None)
        self.changed.set()

    def tick(self, now: datetime) -> None:
        """Nothing waits on time here."""

    def rename_source(self, old: str, new: str) -> None:
        """`old`'s firing alerts go on under `new` (a rotated file): shown there, resolved there."""
        with self._lock:
            self._firing = moved_source(self._firing, old, new)
        self.changed.set()

    # --- the view's side -------------------------------------------------------------------

    def rows(self) -> list[SourceRow]:
        """Every source that has said something, in name order."""
        with self._lock:
            sources = sorted(set(self._facts) | set(self._runs))
            firing = list(self._firing.values())
            return [self._row(source, firing) for source in sources]

    def _row(self, source: str, firing: list[AlertEvent]) -> SourceRow:
        facts = self._facts.get(source, _Facts())
        return SourceRow(
            source=source,
            run=self._runs.get(source),
            step=facts.step if facts.step is not None else self._steps.get(source),
            steps_per_s=steps_per_s(list(facts.points)),
            last_line_s=facts.last_line_s,
            stalled=source in self._stalled,
            losses=tuple(facts.losses),
            grad_norm=facts.grad_norm,
            lr=facts.lr,
            throughput=tuple(facts.throughput),
            q_hs=facts.q_hs,
            q_hsb=facts.q_hsb,
            alerts=tuple(e for e in firing if e.source == source),
        )

    def firing(self) -> list[AlertEvent]:
        """Every alert firing now (GPU and NVML alerts included), in firing order."""
        with self._lock:
            return list(self._firing.values())

    def recent(self) -> list[tuple[float, AlertEvent]]:
        """The last alert events with their arrival time, oldest first."""
        with self._lock:
            return list(self._recent)


def steps_per_s(points: list[tuple[float, int]]) -> float | None:
    """Steps per second over the last `RATE_WINDOW_S` of the (time, step) points."""
    if len(points) < 2:
        return None
    end_t, end_step = points[-1]
    recent = [(t, s) for t, s in points if end_t - t <= RATE_WINDOW_S and s <= end_step]
    start_t, start_step = recent[0]
    if end_t <= start_t:
        return None
    return (end_step - start_step) / (end_t - start_t)


def _or(value: T | None, previous: T | None) -> T | None:
    return value if value is not None else previous
