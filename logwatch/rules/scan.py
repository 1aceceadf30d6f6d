"""Gate scans: the lines each rule gate selects on a long batch, in as few passes as can be.

Most gates are a rule's plain regex, an alternation of literals (`gates.py`), and on a healthy
log they select no line at all. Each costs a pass over the text of its own, although the regex
engine's literal prefilter (Teddy) finds any of a few dozen literals in about the time of one.
So plain gates are matched together: in unions of up to `UNION_ALTERNATIVES` alternatives, one
pass each; a gate's own regex then runs only on the (few) lines its union selects. A line
matches a gate exactly when it matches the gate's union and the gate: the union is only a way
to find the candidates. A gate with an expression of its own (`Needs.rows`) is a pass of its own.

Where the parse says each line's shape (`ParsedBlock.shapes`), a pass reads only the lines
without a shape and those of the shapes its gates reach (`reach.reached`): a line of another
shape cannot match them. Gates are grouped by what they reach, so that each union reads the
same lines.

A gate with an expression of its own whose every rule moves only on the lines a cheaper
expression selects (`Needs.valued_rows`: nan-loss's loss lines) is read only on those lines,
where they hold few of a block's bytes (DFlash: its snapshot lines, 40 % of the bytes, hold no
loss): the gate's rows among them are rows that can move its rules, which is all a gate must
give (`Needs.rows`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import cast

import polars as pl

from logwatch.rules.reach import ANY

VALUED_SHARE = 0.75
"""A gate with valued rows is read only on them where, in a block's first `_SAMPLE_ROWS`
lines, they hold at most this share of the bytes (a second pass costs more than it spares
where nearly every line is valued: Megatron's iteration lines, a Trainer's dicts)."""
_SAMPLE_ROWS = 256

UNION_ALTERNATIVES = 64
"""The most top-level alternatives a union of gates gets: about as many literals as the regex
engine's fastest prefilter takes (a union past that is slower than its gates one by one)."""
_ALTERNATIVE = re.compile(r"(?<!\\)\|")


def _alternatives(gate: str) -> int:
    """About how many literals the regex `gate` is an alternation of (for grouping only). A
    case-insensitive group fills a union alone: the regex engine's prefilter takes each of its
    words in every casing, so one such gate already holds about as many literals as the
    fastest prefilter takes; with other gates beside it the union loses that prefilter (the
    crash rule's `(?i:killed|...)` gate with four others: 7.8 ms on a DFlash block's snapshot
    and data lines, against 4.1 ms for the gate alone and the four together)."""
    if "(?i" in gate:
        return UNION_ALTERNATIVES
    return len(_ALTERNATIVE.split(gate))


class GateScan:
    """The lines of a frame that each gate selects (`hits`), for gates given as gate -> each
    line's match (the rules' `gate_rows`); `reach`: gate -> the shapes whose lines may match
    it (where the scan is told each line's shape; a gate not given reaches every shape)."""

    def __init__(
        self,
        rows: Mapping[str, pl.Expr],
        reach: Mapping[str, frozenset[int]] | None = None,
        valued: Mapping[str, tuple[pl.Expr, pl.Expr | None]] | None = None,
    ) -> None:
        self._rows = dict(rows)
        # gate -> the lines outside of which none of its rules moves (`Needs.valued_rows`),
        # and a cheaper superset of its rows (`Needs.candidates`), all read over `text` only
        self._valued = {
            gate: (expr, candidates)
            for gate, (expr, candidates) in (valued or {}).items()
            if gate in rows and _roots(expr) | _roots(rows[gate]) | _roots(candidates) <= {"text"}
        }
        given = reach or {}
        # a gate whose expression reads more than the text is read on every line
        self._reach = {
            gate: given.get(gate, ANY) if set(expr.meta.root_names()) <= {"text"} else ANY
            for gate, expr in rows.items()
        }
        plain = [gate for gate, expr in rows.items() if _is_plain(gate, expr)]
        # on lines of untold shapes (live batches) by size alone; on told ones by reach too
        self._unions = _grouped(plain, lambda gate: ANY)
        self._told = _grouped(plain, self._reach.__getitem__)
        self._own = [gate for gate in rows if gate not in plain]
        self._union_rows = {  # built once
            tuple(union): _union_rows(union) for union in [*self._unions, *self._told]
        }

    @property
    def unions(self) -> list[list[str]]:
        """The plain gates, grouped as they are matched together (on lines of untold shapes)."""
        return [list(union) for union in self._unions]

    def hits(
        self,
        frame: pl.DataFrame,
        gates: Collection[str] | None = None,
        *,
        lines: ShapeRows | None = None,
    ) -> dict[str, pl.Series]:
        """The rows (UInt32) of the lines of `frame` each gate selects, for `gates` (None: all),
        in the order the gates were given; `lines`: the frame's lines by shape, where the parse
        told them."""
        wanted = set(self._rows if gates is None else gates)
        unions = self._told if lines is not None and lines.told else self._unions
        picked = [i for i, union in enumerate(unions) if wanted.intersection(union)]
        passes = [
            (self._union_rows[tuple(unions[i])].alias(f"_u{i}"), self._reach[unions[i][0]])
            for i in picked
        ]
        hits: dict[str, pl.Series] = {}
        for gate in self._own:
            if gate in wanted and (lines is None or not lines.told):
                found_valued = self._valued_hits(frame, gate)
                if found_valued is not None:
                    hits[gate] = found_valued
        passes += [
            (
                self._rows[gate].fill_null(False).arg_true().implode().alias(f"_o{i}"),
                self._reach[gate],
            )
            for i, gate in enumerate(self._own)
            if gate in wanted and gate not in hits
        ]
        found = (lines or ShapeRows(frame, None)).select(passes) if passes else {}
        for i, gate in enumerate(self._own):
            if gate in wanted and gate not in hits:
                hits[gate] = found[f"_o{i}"]
        for i in picked:
            hits.update(self._split(frame, unions[i], found[f"_u{i}"], wanted))
        return {gate: hits[gate] for gate in self._rows if gate in hits}

    def _valued_hits(self, frame: pl.DataFrame, gate: str) -> pl.Series | None:
        """The rows of `gate`'s lines among those its rules' valued rows select, read only
        there; None where they hold most of the block's bytes (then the gate reads every line,
        in one pass)."""
        given = self._valued.get(gate)
        if given is None:
            return None
        valued, candidates = given
        text = pl.col("text")
        head = frame.head(_SAMPLE_ROWS).select(
            text.str.len_bytes().filter(valued.fill_null(False)).sum().alias("valued"),
            text.str.len_bytes().sum().alias("all"),
        )
        some, every = head.row(0)
        if not every or some > VALUED_SHARE * every:
            return None
        rows = frame.select(valued.fill_null(False)).to_series().arg_true()
        if rows.is_empty():
            return rows
        lines = frame.get_column("text").gather(rows).to_frame()
        if candidates is not None:
            kept = lines.select(candidates.fill_null(False)).to_series()
            rows, lines = rows.filter(kept), lines.filter(kept)
        return rows.filter(lines.select(self._rows[gate].fill_null(False)).to_series())

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


class ShapeRows:
    """A frame's lines as passes over `text` read them, each only where it can match: the
    lines without a shape and those of the shapes it reaches (all, when `shapes` is None)."""

    def __init__(self, frame: pl.DataFrame, shapes: pl.Series | None) -> None:
        self._frame = frame
        self._shapes = shapes
        self._present: frozenset[int] | None = None
        if shapes is not None:
            if shapes.len() != frame.height:
                raise ValueError(f"shapes has {shapes.len()} rows for a frame of {frame.height}")
            self._present = frozenset(shapes.drop_nulls().unique().to_list())
        self._read: dict[frozenset[int], tuple[pl.Series, pl.DataFrame]] = {}

    @property
    def told(self) -> bool:
        """Whether the lines' shapes were told (else every pass reads every line)."""
        return self._present is not None

    def _key(self, reach: frozenset[int]) -> frozenset[int] | None:
        """The shapes present whose lines a pass reaching `reach` reads (None: every line)."""
        if self._present is None or self._present <= reach:
            return None
        return reach & self._present

    def _lines(self, key: frozenset[int]) -> tuple[pl.Series, pl.DataFrame]:
        """The rows (UInt32) without a shape or of one in `key`, and their `text`."""
        found = self._read.get(key)
        if found is None:
            shapes = cast(pl.Series, self._shapes)
            keep = shapes.is_null() | shapes.is_in(sorted(key))
            found = self._read[key] = (keep.arg_true(), self._frame.select("text").filter(keep))
        return found

    def _selected(
        self, exprs: list[tuple[pl.Expr, frozenset[int]]]
    ) -> list[tuple[pl.Series | None, pl.Series]]:
        """Each expression (over `text`, with what it reaches) run on the lines it reads, one
        select per set of lines: (those lines' rows, None for every line; its result), in
        order."""
        groups: dict[frozenset[int] | None, list[int]] = {}
        for n, (_, reach) in enumerate(exprs):
            groups.setdefault(self._key(reach), []).append(n)
        found: dict[int, tuple[pl.Series | None, pl.Series]] = {}
        for key, numbers in groups.items():
            rows, lines = (None, self._frame) if key is None else self._lines(key)
            selected = lines.select([exprs[n][0] for n in numbers]).get_columns()
            found.update((n, (rows, out)) for n, out in zip(numbers, selected, strict=True))
        return [found[n] for n in range(len(exprs))]

    def select(self, passes: list[tuple[pl.Expr, frozenset[int]]]) -> dict[str, pl.Series]:
        """Each pass (an aggregate over `text` giving a list of rows, and what it reaches): the
        rows of the frame it gives, by its name."""
        return {
            out.name: out[0] if rows is None else rows.gather(out[0])
            for rows, out in self._selected(passes)
        }

    def columns(self, columns: list[tuple[pl.Expr, frozenset[int]]]) -> pl.DataFrame:
        """Per-line boolean expressions over `text` (each with what it reaches), each false
        wherever it cannot match and computed only where it can."""
        full = pl.repeat(False, self._frame.height, dtype=pl.Boolean, eager=True)
        return pl.DataFrame(
            out if rows is None else full.scatter(rows, out).alias(out.name)
            for rows, out in self._selected(columns)
        )


def _grouped(plain: list[str], reach: Callable[[str], frozenset[int]]) -> list[list[str]]:
    """Plain gates in unions of at most `UNION_ALTERNATIVES` alternatives, each of gates that
    reach the same shapes."""
    unions: list[list[str]] = []
    size = 0
    for gate in sorted(plain, key=lambda g: (sorted(reach(g)), _alternatives(g))):
        count = _alternatives(gate)
        if not unions or size + count > UNION_ALTERNATIVES or reach(unions[-1][0]) != reach(gate):
            unions.append([])
            size = 0
        unions[-1].append(gate)
        size += count
    return unions


def _roots(expr: pl.Expr | None) -> set[str]:
    return set() if expr is None else set(expr.meta.root_names())


def _is_plain(gate: str, expr: pl.Expr) -> bool:
    """Whether a gate's match is its own regex (what a union can stand in for)."""
    return expr.meta.eq(pl.col("text").str.contains(gate))


def _union_rows(union: list[str]) -> pl.Expr:
    """The rows of the lines matching any gate of `union`: one regex, each gate a group (so a
    flag a gate sets stays inside it)."""
    pattern = "|".join(f"(?:{gate})" for gate in union)
    return pl.col("text").str.contains(pattern).fill_null(False).arg_true().implode()
