"""A parse group of many sources' frames as one frame (`Group`): each row's frame, a check
per frame, gate rows cut per frame, every frame's last step; and which frames restart their run
after their first line (`restarting`). `engine/many.py` steps the sources from it."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import polars as pl

from logwatch.engine.batch import _TAIL_ROWS, last_step_of
from logwatch.parse import complete
from logwatch.rules.scan import ShapeRows


class ParseGroup:
    """A parse group's frame (`whole`), its frames' rows (`bounds`) and lines' shapes."""

    def __init__(
        self, whole: pl.DataFrame, bounds: list[tuple[int, int]], shapes: pl.Series | None
    ) -> None:
        self.whole, self.bounds, self.shapes = whole, bounds, shapes
        self.lines = ShapeRows(whole, shapes)
        self._number: pl.Series | None = None

    @property
    def number(self) -> pl.Series:
        """Each row's frame (0, 1, ...; an empty frame's begin is the next one's)."""
        if self._number is None:
            begins = pl.Series([begin for begin, _ in self.bounds], dtype=pl.UInt32)
            rows = pl.int_range(self.whole.height, dtype=pl.UInt32, eager=True)
            self._number = (begins.search_sorted(rows, side="right") - 1).alias("_f")
        return self._number

    def any_per_frame(self, check: pl.Expr) -> list[bool]:
        """The aggregate `check` (a `.any()`) over each frame's rows (False: no rows)."""
        found = dict(
            self.whole.hstack([self.number]).group_by("_f").agg(check.alias("_c")).iter_rows()
        )
        return [bool(found.get(i, False)) for i in range(len(self.bounds))]

    def cut(self, hits: dict[str, pl.Series]) -> dict[str, list[pl.Series]]:
        """Each gate's rows (sorted, of `whole`) cut into each frame's, counted from its first."""
        edges = pl.Series([edge for bound in self.bounds for edge in bound], dtype=pl.UInt32)
        out: dict[str, list[pl.Series]] = {}
        for gate, rows in hits.items():
            if rows.is_empty():
                out[gate] = [rows] * len(self.bounds)
                continue
            at = rows.search_sorted(edges.cast(rows.dtype), side="left").to_list()
            # every row counted from its frame's first in one subtraction (the largest begin
            # at or before a row is its frame's), then sliced: a subtraction per frame cost more
            begins = edges.gather_every(2).cast(rows.dtype)
            local = rows - begins.gather(begins.search_sorted(rows, side="right") - 1)
            none = rows.clear()
            out[gate] = [
                local.slice(low, high - low) if high > low else none
                for low, high in zip(at[::2], at[1::2], strict=True)
            ]
        return out

    def last_steps(self, frames: Sequence[pl.DataFrame]) -> dict[int, int | None]:
        """Each frame's last step its lines say (`last_step_of`): the steps of every frame's
        lines (of its last lines, for long frames) parsed at once, and a frame whose last
        lines say none read on alone."""
        present = [n for n, frame in enumerate(frames) if frame.height]
        if not present:
            return {}
        whole = self.whole.height <= 4 * _TAIL_ROWS * len(present)
        if whole:  # small files: all their lines
            rows, lines = self.number, self.whole
        else:
            tails = [frames[n].tail(_TAIL_ROWS) for n in present]
            number = pl.Series(present, dtype=pl.UInt32)
            sizes = pl.Series([tail.height for tail in tails], dtype=pl.UInt32)
            rows = pl.select(pl.lit(number).repeat_by(pl.lit(sizes)).explode()).to_series()
            lines = pl.concat(tails)
        step = complete(lines, {"step"}).get_column("step")
        found = (
            pl.DataFrame([rows.alias("_f"), step])
            .drop_nulls("step")
            .group_by("_f")
            .agg(pl.col("step").last())
        )
        out: dict[int, int | None] = {int(f): int(s) for f, s in found.iter_rows()}
        for n in present:
            if n not in out and not whole:  # its last lines say no step: read further back
                out[n] = last_step_of(frames[n])
        return out


def restarting(whole: pl.DataFrame, bounds: list[tuple[int, int]]) -> set[int]:
    """The frames with a run start after their first line (`prepare` reads each run's step)."""
    run_start = whole.get_column("run_start")
    if not run_start.any():  # a native check
        return set()
    begins = [begin for begin, _ in bounds]
    out = set()
    for row in run_start.arg_true().to_list():
        frame = bisect.bisect_right(begins, row) - 1
        if row != begins[frame]:
            out.add(frame)
    return out
