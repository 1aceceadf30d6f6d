"""A rule's step as the engine runs it (`_guarded`: a rule that raises is switched off for its
source), and a gated rule's step over a long batch read in pieces from its gate lines on
(`_gated`): a quiet rule cannot move on the rows between, so they need no parse."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, cast

import polars as pl

from logwatch.engine.batch import (
    _GATED_PIECES,
    _GATED_ROWS,
    _filled_step,
    _Pieces,
    _step_before,
    _stretches,
)
from logwatch.engine.plan import _Needs, _Planned
from logwatch.engine.state import SourceState, Step
from logwatch.parse import complete
from logwatch.rules.base import Transition
from logwatch.rules.loader import RuleSpec


class _Stepping(_Planned):
    """Running rule steps: guarded, and gated rules piece by piece (`Engine`'s base)."""

    def _rule_state(self, spec: RuleSpec, state: SourceState) -> dict[str, Any]:
        """A rule's state as its step receives it (`_guarded`)."""
        return state.rule_states.get(spec.id) or spec.rule.initial_state()

    def _seen_state(self, spec: RuleSpec, state: SourceState) -> dict[str, Any]:
        """`_rule_state` for a check that only reads it (`Needs.quiet`): a rule's initial state
        made once, not at each of a fleet's ~50 checks per file."""
        found = state.rule_states.get(spec.id)
        if found:
            return found
        initial = self._initial.get(spec.id)
        if initial is None:
            initial = self._initial[spec.id] = spec.rule.initial_state()
        return initial

    def _gated(
        self,
        order: int,
        source: str,
        state: SourceState,
        frame: pl.DataFrame,
        missing: frozenset[str],
        prior: int | None,
        hits: pl.Series | None = None,
        pieces: _Pieces | None = None,
        from_start: bool = False,
    ) -> list[tuple[int, Transition]] | None:
        """A gated rule's step over a batch, with its `missing` columns computed only from each
        gate line on (and from the first row when `from_start`: the rule is not quiet as the
        batch begins), until the rule is quiet again (the lines between cannot move a quiet
        rule, as a batch without a gate line cannot): (line, transition) with rows of `frame`.
        None where the gate lines lie in too many places to gain by this
        (one more than one in `_GATED_ROWS` rows from the last). A stretch of gate lines close
        together (a NaN episode: every step line) is read as one piece, to `_GATED_ROWS` rows
        past its last; while the rule is not quiet, the pieces after it grow 4 times each; past
        `_GATED_PIECES` pieces, the rest of the batch is one piece."""
        spec, needs = self.rules[order], self._needs[order]
        if hits is None:  # the rows of its gate's lines
            hits = frame.select(cast(pl.Expr, needs.rows).fill_null(False)).to_series().arg_true()
        if from_start and (hits.is_empty() or hits[0] != 0):
            hits = pl.Series([0], dtype=hits.dtype).append(hits)
        stretches = _stretches(hits, _GATED_ROWS)
        if len(stretches) * _GATED_ROWS > frame.height:
            return None
        found: list[tuple[int, Transition]] = []
        end = read = 0
        for first, last in stretches:
            if last < end:
                continue  # evaluated with the rows before it
            # rows between `end` and the next gate line cannot move the quiet rule: reading
            # them too is exact
            start = max(first, end)
            size, grown = last + _GATED_ROWS - start, _GATED_ROWS
            while True:
                read += 1
                if read > _GATED_PIECES:
                    size = frame.height - start
                piece, rows, end = _piece(frame, start, size, missing, prior, pieces, needs)
                step = partial(spec.rule.evaluate, piece)
                for transition in self._guarded(spec, source, state, step) if piece.height else []:
                    at = transition.row + start if rows is None else rows[transition.row]
                    moved = replace(transition, row=at)
                    found.append((moved.fields.get("line", frame.item(moved.row, "line")), moved))
                rule_state = self._seen_state(spec, state)
                if end >= frame.height or (spec.id, source) in self._failed:
                    break
                if cast(Callable[..., bool], needs.quiet)(rule_state):
                    break
                start, size = end, grown * 4
                grown = size
            if end >= frame.height:
                break
        return found

    def _guarded(
        self, spec: RuleSpec, source: str, state: SourceState, step: Step
    ) -> list[Transition]:
        """Run one rule step on its state; a rule that raises is reported once and switched off
        for that source, so the reader and the other rules keep working."""
        if (spec.id, source) in self._failed:
            return []
        rule_state = self._rule_state(spec, state)
        try:
            transitions, state.rule_states[spec.id] = step(rule_state)
        except Exception as exc:
            self._failed.add((spec.id, source))
            if self._on_error is None:
                raise
            self._on_error(spec.id, source, exc)
            return []
        return transitions


def _piece(
    frame: pl.DataFrame,
    start: int,
    size: int,
    missing: frozenset[str],
    prior: int | None,
    pieces: _Pieces | None,
    needs: _Needs,
) -> tuple[pl.DataFrame, pl.Series | None, int]:
    """The rows [start, start + size) of `frame` a gated rule reads, with its `missing` columns
    computed, their rows in `frame` (None: all, in order), and the row after them. Only the
    lines that may give the rule a value (`Needs.valued_rows`) where it says them and reads
    the pieces alone (others' pieces are computed once for all): the others cannot move it."""
    valued = needs.valued_rows is not None and pieces is not None and not pieces.shared
    if valued and "step" not in missing:
        piece, rows = cast(_Pieces, pieces).valued(start, size, cast(pl.Expr, needs.valued_rows))
        return piece, rows, min(start + size, frame.height)
    if pieces is None:
        piece = complete(frame.slice(start, size), missing)
    else:
        piece = pieces.get(start, size)
    if "step" in missing:
        before = (
            _step_before(frame, start, prior)
            if pieces is None
            else pieces.step_before(start, prior)
        )
        piece = _filled_step(piece, before)
    return piece, None, start + piece.height
