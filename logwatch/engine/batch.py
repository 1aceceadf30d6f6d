"""One batch's plan: what `Engine.prepare` computes ahead, where a batch is cut at run starts,
the step filled in from the lines before, and the rows an event reads."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from logwatch.parse import ALWAYS, SCHEMA, complete
from logwatch.rules.base import Override
from logwatch.rules.gpu import LogGpuRows
from logwatch.rules.loader import RuleSpec


def kept_last(kept: pl.DataFrame | None, frame: pl.DataFrame, count: int) -> pl.DataFrame:
    """The last `count` non-blank lines of what was kept and the batch `frame` after it (the
    rows of `frame`'s end are looked at, more only while too few of them are non-blank): what
    a driver keeps of a source for `Engine.finish`, the same for any split into batches."""
    size = count
    while True:
        found = frame.tail(size).filter(pl.col("text").str.strip_chars() != "")
        if found.height >= count or size >= frame.height:
            break
        size *= 4
    found = found.select(list(SCHEMA))
    if kept is None or found.height >= count:
        return found.tail(count)
    return pl.concat([kept, found], how="vertical_relaxed").tail(count)


def _last_of(kept: pl.DataFrame | None, count: int, columns: frozenset[str]) -> pl.DataFrame:
    """The last `count` kept lines with `columns` computed from their text (none when 0)."""
    if kept is None or not count:
        return pl.DataFrame(schema=SCHEMA)
    return complete(kept.tail(count), columns - ALWAYS)


_SMALL_BATCH = 64
"""Batches up to this many lines check each gate by its regex (`Engine._small_gate_checks`)."""
_GATED_ROWS = 64
"""Rows a quiet gated rule first reads from a gate line (then 4 times as many, ... while it
is not quiet); a batch whose gate lines are more than one in this many is read whole, unless
they lie close together (a stretch of them counts once)."""
_GATED_PIECES = 24
"""The most pieces a quiet gated rule reads a batch in, one after another (each pays polars'
fixed cost per query); the rest of the batch is then one piece."""


class _Pieces:
    """Pieces of a batch (rows [start, start + size)) with `columns` computed: those that the
    quiet gated rules reading it lack, each piece computed once for all of them (rules whose
    gates open on the same lines, as nan-loss and nan-grad do in a divergence, read the same
    pieces). `prepared`: where the block's line shapes come from."""

    def __init__(
        self,
        frame: pl.DataFrame,
        columns: frozenset[str],
        prepared: Prepared | None,
        *,
        shared: bool = False,
    ) -> None:
        self._frame, self.columns, self._prepared = frame, columns, prepared
        self.shared = shared  # read by more than one rule (each reads whole pieces, once)
        self._done: dict[tuple[int, int], pl.DataFrame] = {}

    def step_before(self, row: int, prior: int | None) -> int | None:
        """`_step_before` of the batch's row `row`: `prior` at once where `prepare` found that
        no line of the batch says a step (a Hugging Face Trainer's log)."""
        ready = self._prepared
        if ready is not None and ready.stepped and ready.last_step is None:
            return prior
        return _step_before(self._frame, row, prior)

    def valued(self, start: int, size: int, rows: pl.Expr) -> tuple[pl.DataFrame, pl.Series]:
        """The lines of the piece at `start` of `size` rows that `rows` selects, completed,
        and their rows in the batch."""
        piece = self._frame.slice(start, size)
        picked = piece.select(rows.fill_null(False)).to_series()
        shapes = None if self._prepared is None else self._prepared.shapes_of(start, size)
        if shapes is not None:
            shapes = shapes.filter(picked)
        completed = complete(piece.filter(picked), self.columns, shapes=shapes)
        return completed, picked.arg_true() + start

    def get(self, start: int, size: int) -> pl.DataFrame:
        """The piece at `start` of `size` rows (fewer at the batch's end), completed."""
        found = self._done.get((start, size))
        if found is None:
            shapes = None if self._prepared is None else self._prepared.shapes_of(start, size)
            piece = self._frame.slice(start, size)
            found = self._done[start, size] = complete(piece, self.columns, shapes=shapes)
        return found


def _stretches(rows: pl.Series, gap: int) -> list[tuple[int, int]]:
    """The first and last of each stretch of `rows` (sorted) in which each row is at most
    `gap` rows after the one before."""
    if rows.is_empty():
        return []
    starts = rows.diff().fill_null(gap + 1) > gap
    ends = starts.shift(-1, fill_value=True)
    return list(zip(rows.filter(starts).to_list(), rows.filter(ends).to_list(), strict=True))


def _step_before(frame: pl.DataFrame, row: int, prior: int | None) -> int | None:
    """The step in force at the line before `row`: the last one the batch's lines before it
    say, else `prior` (the source's step before the batch)."""
    said = last_step_of(frame.head(row)) if row else None
    return prior if said is None else said


GroupColumns = Callable[[frozenset[str], int], pl.DataFrame | None]
"""A source's batch of `rows` rows with `columns` completed (`completed_columns` of them), cut
from its group's frame (`Engine.process_many`), or None (not in a group: complete it)."""


def with_columns_of(frame: pl.DataFrame, given: pl.DataFrame, names: Iterable[str]) -> pl.DataFrame:
    """`frame` with its columns `names` taken from `given` (of as many rows): no query."""
    out = frame.clone()
    for name in sorted(names):
        out.replace_column(out.get_column_index(name), given.get_column(name))
    return out


class _EventRows:
    """The rows a batch's events read, with the columns their summaries show (`columns`, not yet
    computed) added: for a few events on a long batch, on their own rows only."""

    def __init__(
        self,
        frame: pl.DataFrame,
        columns: set[str],
        prior: int | None,
        rows: list[int],
        group: GroupColumns | None = None,
        shapes: pl.Series | None = None,
    ) -> None:
        self._frame, self._columns, self._prior = frame, columns, prior
        # each row's shape, where the parse found them: not found again for an event's row
        # (finding them runs every shape's pattern, about 5 ms a row, most of it not the row's)
        self._shapes = shapes
        self._picked: dict[int, dict[str, Any]] = {}
        if columns and len(rows) * _GATED_ROWS > frame.height:  # many: the whole batch
            given = None if group is None else group(frozenset(columns), frame.height)
            if given is None:
                self._frame = complete(frame, columns, shapes=shapes)
            else:  # completed with many sources' lines: those columns of its own rows
                self._frame = pl.DataFrame(
                    [
                        given.get_column(n) if n in given.columns else frame.get_column(n)
                        for n in SCHEMA
                    ]
                )
            if "step" in columns:
                self._frame = _filled_step(self._frame, prior)
            self._columns = set()

    def row(self, index: int) -> dict[str, Any]:
        """Row `index` of the batch, as a dict."""
        if not self._columns:
            return self._frame.row(index, named=True)
        if index not in self._picked:
            shape = None if self._shapes is None else self._shapes.slice(index, 1)
            one = complete(self._frame.slice(index, 1), self._columns, shapes=shape)
            if "step" in self._columns and one.item(0, "step") is None:
                one = _filled_step(one, _step_before(self._frame, index, self._prior))
            self._picked[index] = one.row(0, named=True)
        return self._picked[index]


def _filled_step(frame: pl.DataFrame, prior: int | None) -> pl.DataFrame:
    """The batch with its step forward-filled, from `prior` (the source's last step) first."""
    step = pl.col("step").forward_fill().fill_null(pl.lit(prior, dtype=pl.Int64))
    return frame.with_columns(step)


_TAIL_ROWS = 64
_LAST_ROWS = 16
"""The lines `last_step_of` reads first: its cost is mostly a query per line shape among them
(16 rows of a DFlash or Megatron block, where one says a step, 0.8 ms against 1.5 ms for 64)."""


def last_step_of(frame: pl.DataFrame) -> int | None:
    """The last step a batch's lines say, parsing the step only of its last lines (16, then
    the 1024 before them, then 16 times as many, ... until one says a step; each line once):
    exact, as a line's step is its own. A log whose lines say no step (a Hugging Face
    Trainer's) is parsed once, not about one and a half times over."""
    end, size = frame.height, _LAST_ROWS
    while end > 0:
        start = max(0, end - size)
        steps = complete(frame.slice(start, end - start), {"step"}).get_column("step")
        steps = steps.drop_nulls()
        if steps.len():
            return int(steps[-1])
        end, size = start, max(size, _TAIL_ROWS) * 16
    return None


def _with(frame: pl.DataFrame, columns: frozenset[str], done: frozenset[str]) -> pl.DataFrame:
    missing = columns - done
    return complete(frame, missing) if missing else frame


def _overridden(spec: RuleSpec, override: Override) -> RuleSpec:
    """The spec as one kind of line states it: its case's summary, fix and severity."""
    return replace(
        spec,
        summary=spec.summary if override.summary is None else override.summary,
        fix=spec.fix if override.fix is None else override.fix,
        severity=spec.severity if override.severity is None else override.severity,
    )


@dataclass(frozen=True, slots=True)
class Prepared:
    """`Engine.prepare`'s work on one parsed frame: the lines each gate selects, maybe its last
    step, its GPU rows (`telemetry_rows`), or the error reading them raised."""

    frame: pl.DataFrame
    hits: Mapping[str, pl.Series]  # gate -> the rows of the lines it selects
    gpu_rows: LogGpuRows | None
    error: Exception | None
    stepped: bool = False  # `last_step` is the last step the frame's lines say
    last_step: int | None = None
    ahead: pl.DataFrame | None = None  # the rules' `Needs.ahead` columns, one row per line
    # when stepped and the frame holds run starts: each run's first row -> its last step
    run_steps: Mapping[int, int | None] | None = None
    shapes: pl.Series | None = None  # each line's shape, where its parse found them

    def split(self, pieces: Sequence[tuple[pl.DataFrame, int]]) -> list[Prepared]:
        """What `prepare` would give for each piece (its frame and its first row in this one's:
        the runs of a batch cut at run starts, `_run_bounds`; ascending, not overlapping): the
        gate hits, `ahead`, the run's last step and GPU rows cut to it, the GPU rows of all cut
        at once (`LogGpuRows.pieces`: a few queries for all the pieces of a batch, not for
        each). GPU rows whose reading left pairs out or failed are read again on the piece, so
        that what is said of them is said of the piece it is in."""
        bounds = [(begin, begin + frame.height) for frame, begin in pieces]
        gpu_rows: list[LogGpuRows | None] = [None] * len(pieces)
        if self.gpu_rows is not None and not self.gpu_rows.dropped:
            gpu_rows = list(self.gpu_rows.pieces(bounds, keys=False))
        # else, with `error` None: read on the piece, when a rule asks
        return [
            self._piece(frame, begin, rows)
            for (frame, begin), rows in zip(pieces, gpu_rows, strict=True)
        ]

    def _piece(self, frame: pl.DataFrame, begin: int, gpu_rows: LogGpuRows | None) -> Prepared:
        end = begin + frame.height
        hits = {gate: _rows_within(rows, begin, end) for gate, rows in self.hits.items()}
        ahead = None if self.ahead is None else self.ahead.slice(begin, frame.height)
        shapes = None if self.shapes is None else self.shapes.slice(begin, frame.height)
        stepped = self.stepped and self.run_steps is not None and begin in self.run_steps
        return Prepared(
            frame,
            hits,
            gpu_rows,
            None,
            stepped=stepped,
            last_step=self.run_steps.get(begin) if stepped and self.run_steps else None,
            ahead=ahead,
            shapes=shapes,
        )

    def moved(self, frame: pl.DataFrame) -> Prepared:
        """This, for `frame`: this one's frame with other timestamps (a block whose yearless
        head took the year carried from the block before, `YearCarry`). What reads no
        timestamp stays (gate hits, steps, shapes); the `ahead` columns and GPU rows are left
        to the engine to compute on `frame`."""
        if frame.height != self.frame.height:
            raise ValueError(f"a frame of {frame.height} rows for one of {self.frame.height}")
        return replace(self, frame=frame, gpu_rows=None, error=None, ahead=None)

    def shapes_of(self, start: int, size: int) -> pl.Series | None:
        """The shapes of the frame's rows [start, start + size) (None: not known)."""
        return None if self.shapes is None else self.shapes.slice(start, size)


def _rows_within(rows: pl.Series, begin: int, end: int) -> pl.Series:
    """The sorted rows in [begin, end), counted from `begin`."""
    if rows.is_empty():
        return rows
    bounds = pl.Series([begin, end], dtype=rows.dtype)
    low, high = rows.search_sorted(bounds, side="left").to_list()
    return rows.slice(low, high - low) - begin


@dataclass(frozen=True, slots=True)
class _LiveChecks:
    """What `Engine._live_checks` found on a batch: whether each gate opens, the streak rules
    (by order) that cannot move on it, and whether it lacks GPU snapshot keys (None: not
    checked)."""

    opened: dict[str, bool]
    calm: frozenset[int] = frozenset()
    gpu_empty: bool | None = None
    ahead: pl.DataFrame | None = None  # the rules' `Needs.ahead` columns (as `prepare` gives)


@dataclass(frozen=True, slots=True)
class Group:
    """A `process_many` call's frames as one (`frame`: source -> its first row and row count),
    and the columns completed on it so far (`completed_columns` -> those columns)."""

    frame: pl.DataFrame
    rows: dict[str, tuple[int, int]]
    completed: dict[frozenset[str], pl.DataFrame] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReadyChecks:
    """What `_live_checks` would find on one source's small batch, computed for many sources
    at once (`Engine.process_many`): every gate's check, the streak checks (rule order ->
    whether a streak can start), the GPU keys' (None: not checked) and the `ahead` columns."""

    rows: int
    gates: dict[str, bool]
    streaks: dict[int, bool]
    gpu: bool | None
    ahead: pl.DataFrame | None

    def checks(self, gates: Iterable[str], streaks: Iterable[int]) -> _LiveChecks:
        """The live checks of `gates` and `streaks` (those the batch's rules are quiet in)."""
        return _LiveChecks(
            {gate: self.gates[gate] for gate in gates},
            frozenset(order for order in streaks if not self.streaks[order]),
            None if self.gpu is None else not self.gpu,
            self.ahead,
        )


def _step_filled(frame: pl.DataFrame) -> bool:
    """Whether a small batch's step needs no filling: every line says one (a live DFlash step
    line), so `_filled_step` would give the same frame."""
    step = frame.get_column("step")
    return frame.height <= _SMALL_BATCH and step.dtype == pl.Int64 and not step.null_count()


def _opened(frame: pl.DataFrame, checks: Mapping[str, pl.Expr]) -> dict[str, bool]:
    """Whether some line of `frame` matches each gate (gate -> its check): one select."""
    if not checks:
        return {}
    found = frame.select(checks.values()).row(0)
    return {gate: bool(hit) for gate, hit in zip(checks, found, strict=True)}


def _run_bounds(frame: pl.DataFrame) -> list[tuple[int, int]] | None:
    """The rows [begin, end) of each run of a batch cut where a new run starts (None: no run
    starts in it)."""
    run_start = frame.get_column("run_start")
    if not run_start.any():  # a native check; `arg_true` is a query
        return None
    bounds = sorted({0, *run_start.arg_true().to_list(), frame.height})
    return list(itertools.pairwise(bounds))


def _split_runs(
    frame: pl.DataFrame, *, has_history: bool
) -> list[tuple[pl.DataFrame, int | None, int]]:
    """Cut a batch where a new run starts; each cut after the source's first line restarts
    state: (piece, the line it restarts at or None, its first row in `frame`)."""
    runs = _run_bounds(frame)
    if runs is None:
        return [(frame, None, 0)]
    starts = set(frame.get_column("run_start").arg_true().to_list())
    pieces = []
    for begin, end in runs:
        piece = frame.slice(begin, end - begin)
        is_restart = begin in starts and (begin > 0 or has_history)
        pieces.append((piece, int(piece.get_column("line")[0]) if is_restart else None, begin))
    return pieces
