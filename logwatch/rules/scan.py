"""Gate scans: the lines each rule gate selects on a long batch, in as few passes as can be.

Most gates are a rule's plain regex, an alternation of literals (`gates.py`), and on a healthy
log they select no line at all. Each costs a pass over the text of its own, although the regex
engine's literal prefilter (Teddy) finds any of a few dozen literals in about the time of one.
So plain gates are matched together: in unions of up to `UNION_ALTERNATIVES` alternatives, one
pass each; a gate's own regex then runs only on the (few) lines its union selects. A line
matches a gate exactly when it matches the gate's union and the gate: the union is only a way
to find the candidates. A gate with an expression of its own (`Needs.rows`) is a pass of its own.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

import polars as pl

UNION_ALTERNATIVES = 64
"""The most top-level alternatives a union of gates gets: about as many literals as the regex
engine's fastest prefilter takes (a union past that is slower than its gates one by one)."""
_ALTERNATIVE = re.compile(r"(?<!\\)\|")


def _alternatives(gate: str) -> int:
    """About how many literals the regex `gate` is an alternation of (for grouping only)."""
    return len(_ALTERNATIVE.split(gate))


class GateScan:
    """The lines of a frame that each gate selects (`hits`), for gates given as gate -> each
    line's match (the rules' `gate_rows`)."""

    def __init__(self, rows: Mapping[str, pl.Expr]) -> None:
        self._rows = dict(rows)
        plain = [gate for gate, expr in rows.items() if _is_plain(gate, expr)]
        self._unions: list[list[str]] = []
        size = 0
        for gate in sorted(plain, key=_alternatives):
            count = _alternatives(gate)
            if not self._unions or size + count > UNION_ALTERNATIVES:
                self._unions.append([])
                size = 0
            self._unions[-1].append(gate)
            size += count
        self._own = [gate for gate in rows if gate not in plain]
        self._union_rows = [_union_rows(union) for union in self._unions]  # built once

    @property
    def unions(self) -> list[list[str]]:
        """The plain gates, grouped as they are matched together."""
        return [list(union) for union in self._unions]

    def hits(
        self, frame: pl.DataFrame, gates: Collection[str] | None = None
    ) -> dict[str, pl.Series]:
        """The rows (UInt32) of the lines of `frame` each gate selects, for `gates` (None: all),
        in the order the gates were given."""
        wanted = set(self._rows if gates is None else gates)
        picked = [i for i, union in enumerate(self._unions) if wanted.intersection(union)]
        unions = [self._unions[i] for i in picked]
        passes = [self._union_rows[i].alias(f"_u{i}") for i in picked]
        passes += [
            self._rows[gate].fill_null(False).arg_true().implode().alias(f"_o{i}")
            for i, gate in enumerate(self._own)
            if gate in wanted
        ]
        if not passes:
            return {}
        found = frame.select(passes)
        hits: dict[str, pl.Series] = {}
        for i, gate in enumerate(self._own):
            if gate in wanted:
                hits[gate] = found.get_column(f"_o{i}")[0]
        for i, union in zip(picked, unions, strict=True):
            candidates: pl.Series = found.get_column(f"_u{i}")[0]
            hits.update(self._split(frame, union, candidates, wanted))
        return {gate: hits[gate] for gate in self._rows if gate in hits}

    def _split(
        self, frame: pl.DataFrame, union: list[str], candidates: pl.Series, wanted: set[str]
    ) -> dict[str, pl.Series]:
        """Each gate's rows among the candidate rows its union selected."""
        gates = [gate for gate in union if gate in wanted]
        if candidates.is_empty():
            return dict.fromkeys(gates, candidates)
        lines = frame.get_column("text").gather(candidates).to_frame()
        matched = lines.select(
            self._rows[gate].fill_null(False).alias(f"_g{i}") for i, gate in enumerate(gates)
        )
        return {
            gate: candidates.filter(matched.get_column(f"_g{i}")) for i, gate in enumerate(gates)
        }


def _is_plain(gate: str, expr: pl.Expr) -> bool:
    """Whether a gate's match is its own regex (what a union can stand in for)."""
    return expr.meta.eq(pl.col("text").str.contains(gate))


def _union_rows(union: list[str]) -> pl.Expr:
    """The rows of the lines matching any gate of `union`: one regex, each gate a group (so a
    flag a gate sets stays inside it)."""
    pattern = "|".join(f"(?:{gate})" for gate in union)
    return pl.col("text").str.contains(pattern).fill_null(False).arg_true().implode()
