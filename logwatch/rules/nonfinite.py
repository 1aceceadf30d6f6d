"""The `nonfinite` rule: a NaN or Inf in a column (the loss, the grad norm), per rank, with the
gate that lets a batch without one pass it by."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from logwatch.alerts import FIRING, RESOLVED
from logwatch.parse.dialects.generic import LOSS_LINES, NONFINITE_VALUE, SPELLED_NONFINITE
from logwatch.rules.base import Needs, Outcome, Override, Part, Transition
from logwatch.rules.nonfinite_many import nonfinite_many

# The lines that can hold a non-finite value (`parse.dialects.generic.NONFINITE_VALUE`): the
# gate outside of which a nonfinite rule cannot move.
NONFINITE_GATE = NONFINITE_VALUE


def _nonfinite_rows() -> pl.Expr:
    """The lines `NONFINITE_GATE` selects, as a pass of its own (not in a union of literal
    gates: its exponent and digit-run branches have no literal, and would take the union's
    literal prefilter away). One regex pass: on Megatron and HF lines, where every line has an
    `E+00` exponent or is over 200 bytes long, it costs a third of a pass per branch."""
    return pl.col("text").str.contains(f"(?:{NONFINITE_GATE})")


NONFINITE_ROWS = _nonfinite_rows()


def _nonfinite_candidates() -> pl.Expr:
    """Every line `NONFINITE_GATE` selects, maybe more, by passes with a literal to start from
    (the gate's exponent and digit-run branches have none): its spelled NaN / Inf without the
    `number of ` look-behind; an `e` or `E` before a digit or a `+` (its exponent, on an ASCII
    line, where `\\d` is `[0-9]`); a line of 200 bytes or more (its digit run); a line with a
    byte outside ASCII (where `\\d` reads other digits too)."""
    text = pl.col("text")
    exponents = [f"{e}{d}" for e in "eE" for d in "0123456789"] + [r"e\+", r"E\+"]
    literal_led = text.str.contains(f"(?:{SPELLED_NONFINITE})|" + "|".join(exponents))
    size = text.str.len_bytes()
    return literal_led | (size >= 200) | (size != text.str.len_chars())


NONFINITE_CANDIDATES = _nonfinite_candidates()
_LOSS_ROWS = pl.col("text").str.contains(LOSS_LINES)


@dataclass(frozen=True, slots=True)
class NonFiniteRule:
    """Fires at the first row whose `column` is NaN or +-Inf; resolves at the next finite one.

    Lines of several ranks in one log (`[rank3]:` prefixes) are followed per rank: the alert
    fires when the first rank goes non-finite and resolves when no rank is non-finite any more,
    so ranks reporting in turn do not make it flap.

    `masked_by`: a value of exactly 0 on a line where that column is non-finite counts as
    non-finite too (a trainer that leaves NaN losses out of its average prints `'loss': 0.0`
    beside `'grad_norm': nan`); such a line fires with `masked_summary` and never resolves."""

    column: str
    masked_by: str | None = None
    masked_summary: str | None = None

    @property
    def needs(self) -> Needs:
        """The column and the rank; only a line spelling a non-finite value can make it bad."""
        masked = {self.masked_by} if self.masked_by else set()
        return Needs(
            frozenset({self.column, "rank", *masked}),
            NONFINITE_GATE,
            NONFINITE_ROWS,
            valued=frozenset({self.column}),  # a line without a value is passed over
            valued_rows=_LOSS_ROWS if self.column == "loss" else None,
            candidates=NONFINITE_CANDIDATES,
        )

    def quiet(self, state: dict[str, Any]) -> bool:
        """No rank is non-finite."""
        return not any(state["bad"].values())

    def initial_state(self) -> dict[str, Any]:
        return {"bad": {}}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        values = frame.get_column(self.column)
        # A sum is finite only when every value is (a NaN or an Inf carries through; finite
        # values that overflow only take the exact path below): no polars call.
        masks = None if self.masked_by is None else frame.get_column(self.masked_by)
        if (
            not any(state["bad"].values())
            and math.isfinite(values.sum())
            and (masks is None or math.isfinite(masks.sum()))
        ):
            return [], state  # nothing is bad and nothing goes bad: no transition (most batches)
        if values.null_count() == frame.height:
            return [], state  # no value: no rank moves
        known: dict[str, bool] = dict(state["bad"])
        before = sum(known.values())
        if frame.get_column("rank").null_count() == frame.height:
            lines = self._lines(frame, None)
            on = _unranked_on(lines, known, before)
        else:
            lines = self._lines(frame, pl.col("rank").fill_null(-1))
            on = _ranked_on(lines, known, before)
        # a transition wherever "some rank is bad" changes, from the state's to the last line's
        changed = on != pl.Series([before > 0]).append(on.head(-1))
        rows, fires, found_values, masked = (
            series.filter(changed)
            for series in (
                lines.get_column("_row"),
                on,
                lines.get_column("_value"),
                lines.get_column("_masked"),
            )
        )
        override = Override(summary=self.masked_summary) if self.masked_summary else None
        found = [
            Transition(
                row=row,
                status=FIRING if fire else RESOLVED,
                value=value,
                override=override if fire and hidden else None,
            )
            for row, fire, value, hidden in zip(rows, fires, found_values, masked, strict=True)
        ]
        return found, {"bad": known}

    def evaluate_many(self, frame: pl.DataFrame, parts: Sequence[Part]) -> list[Outcome | None]:
        """`evaluate` on each part, in a few queries for all (`nonfinite_many`)."""
        return nonfinite_many(self, frame, parts)

    def _lines(self, frame: pl.DataFrame, rank: pl.Expr | None) -> pl.DataFrame:
        """The lines with a value: row, value, whether it is non-finite (and rank), one select
        (without a filter when every line has a value: fewer expressions to plan)."""
        values = frame.get_column(self.column)
        if self.masked_by is None and rank is None and not values.null_count():  # a live line
            rows = pl.Series(range(frame.height))
            bad = ~values.is_finite()
            hidden = pl.Series([False] * frame.height)
            return pl.DataFrame({"_row": rows, "_value": values, "_bad": bad, "_masked": hidden})
        value = pl.col(self.column)
        masked = pl.lit(False)
        if self.masked_by is not None:
            masked = ((value == 0) & ~pl.col(self.masked_by).is_finite()).fill_null(False)
        columns = {
            "_row": pl.int_range(pl.len()),
            "_value": value,
            "_bad": ~value.is_finite() | masked,
            "_masked": masked,
        }
        if rank is not None:
            columns["_rank"] = rank
        if values.null_count():
            columns = {name: expr.filter(value.is_not_null()) for name, expr in columns.items()}
        return frame.select(**columns)


def _unranked_on(lines: pl.DataFrame, known: dict[str, bool], before: int) -> pl.Series:
    """Whether some rank is bad after each of `lines`, all of no rank ("-1"): the other ranks'
    count stays, plus this line's badness. Sets that rank's state in `known` (its last line)."""
    bads = lines.get_column("_bad")
    others = before - known.get("-1", False)
    known["-1"] = bool(bads[-1])
    return bads | (others > 0)


def _ranked_on(lines: pl.DataFrame, known: dict[str, bool], before: int) -> pl.Series:
    """Whether some rank is bad after each of `lines` (with `_rank`): the count of bad ranks,
    moved by each line that changes its rank's badness. Updates `known` with each rank's last
    line."""
    # A rank's previous value: its previous line's, else its state's.
    bad_ranks = [int(name) for name, bad in known.items() if bad]
    stated = pl.col("_rank").is_in(bad_ranks) if bad_ranks else pl.lit(False)
    was_bad = pl.col("_bad").shift(1).over("_rank").fill_null(stated)
    delta = pl.col("_bad").cast(pl.Int64) - was_bad.cast(pl.Int64)
    scored = lines.select(
        (before + delta.cum_sum() > 0).alias("_on"),
        pl.col("_rank").is_last_distinct().alias("_last"),
    )
    last = scored.get_column("_last")
    ranks = lines.get_column("_rank").filter(last).cast(pl.String)
    known.update(zip(ranks, lines.get_column("_bad").filter(last), strict=True))
    return scored.get_column("_on")
