"""The `classify` rule type: error lines that fire once per run and label set, each kind of
line with its own summary, fix and severity.

A `classify` rule is a `match` rule with three more things, all data in the pack:

- `details`: regexes whose named groups fill summary placeholders only (`{requested}`,
  `{free}`). They vary per occurrence, so they never become the alert's identity; the labels
  (named groups of `pattern`) are. A detail the line lacks shows as `?`.
- `cases`: an ordered table; the first case whose `pattern` and `labels` fit the line gives the
  event its summary, fix and severity (an Xid code, an NVML cause). `ignore = true` fires
  nothing (another rule says it). A line no case fits gets the rule's own.
- `wrapped`: a message wrapped over two lines (`CUDA out of` / `memory. Tried to ...`) is seen
  on the previous line's tail joined to this one; the tail is carried in the rule state, so
  any split of the file into batches gives the same events.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import polars as pl

from logwatch.alerts import FIRING, Severity
from logwatch.rules.base import (
    Needs,
    Outcome,
    Override,
    Part,
    Rule,
    RuleType,
    Templates,
    Transition,
    matching_rows,
    part_of,
    replace_state,
)
from logwatch.rules.gates import gate_for, gate_pairs
from logwatch.rules.params import Kind, Param, ParamError
from logwatch.rules.writers import WRITER_COLUMNS, with_writers, writer_labels

TAIL_CHARS = 160
"""How much of the previous line a wrapped message is looked for in."""
HEAD_CHARS = 1000
"""How much of this line: TensorFlow 1 names an OOM's device in the `[[Node: ...]]` line after
it, behind the node's name and attributes (often 200 characters or more)."""

# A continuation line may carry the rank prefix torchrun puts on every line.
_CONTINUATION_PREFIX = r"^\s*(?:\[[\w ,:.-]{1,40}\]:\s*)?"

# Placeholders every summary already has (loader.TEMPLATE_FIELDS): a detail must not shadow one.
_RESERVED = frozenset(
    {"rule", "severity", "source", "line", "step", "value", "text", "message", "ts", "labels"}
)


@dataclass(frozen=True, slots=True)
class Case:
    """One kind of line: what it matches (a regex on the line and/or label values) and what
    it says instead of the rule (`ignore`: nothing)."""

    pattern: str | None
    labels: Mapping[str, tuple[str, ...]]
    override: Override
    ignore: bool = False

    def condition(self) -> pl.Expr:
        """Whether a hit row (its `_subject` and label columns) is of this case."""
        parts = [pl.col(name).is_in(list(values)) for name, values in self.labels.items()]
        if self.pattern is not None:
            parts.append(pl.col("_subject").str.contains(self.pattern))
        return pl.all_horizontal(parts)


@dataclass(frozen=True, slots=True)
class ClassifyRule:
    """Fires at the first line matching `pattern`, once per run and label set (a prefixed line's
    rank is one: `rules.writers`); never resolves within the run. See the module docstring for
    details, cases and wrapped lines."""

    pattern: str
    label_names: tuple[str, ...] = ()
    details: tuple[str, ...] = ()
    cases: tuple[Case, ...] = ()
    wrapped: bool = False

    @property
    def needs(self) -> Needs:
        """The text, gated by the literals the pattern needs. A wrapped rule has no gate: it
        carries every batch's last line to join with the next one (the lines holding its
        `line_gate` are found ahead where the engine can)."""
        if not self.wrapped:
            return Needs(frozenset({"text"}), gate_for(self.pattern), pattern=self.pattern)
        gate = self.line_gate
        ahead: dict[str, pl.Expr | str] = {} if gate is None else {_holds_column(gate): gate}
        return Needs(frozenset({"text"}), None, ahead=ahead)

    @property
    def line_gate(self) -> str | None:
        """For a wrapped rule: a gate that a line, or the line before it, matches wherever the
        two joined can match (no literal in it holds the blank the join puts between them),
        its literals whole: the lines it selects are paired (`_paired`) in many passes."""
        return gate_for(self.pattern, split_on=" ", whole=True) if self.wrapped else self.needs.gate

    def quiet(self, state: dict[str, Any]) -> bool:
        """Nothing to join on: no carried tail can start a match with the next line."""
        if not self.wrapped:
            return True
        return not state["tail_hit"] and not _gated(state["tail"], self.line_gate)

    def initial_state(self) -> dict[str, Any]:
        return {"fired": [], "tail": "", "tail_hit": False}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        hits, state = self._hits(frame, state)
        if hits.is_empty():
            return [], state
        hits = with_writers(self._classified(self._captured(hits)), frame)
        identity = [*self.label_names, *WRITER_COLUMNS]  # one per rank of a prefixed line
        firsts = hits.unique(subset=identity, keep="first", maintain_order=True)
        return self._fired(firsts.iter_rows(named=True), state, 0)

    def _fired(
        self, firsts: Iterable[dict[str, Any]], state: dict[str, Any], begin: int
    ) -> Outcome:
        """Fire at each first hit of a label set not fired yet in the run (rows from `begin`)."""
        fired: list[str] = list(state["fired"])
        out: list[Transition] = []
        for hit in firsts:
            labels = writer_labels(hit, {name: hit[name] or "" for name in self.label_names})
            key = repr(sorted(labels.items()))
            if key in fired:
                continue
            fired.append(key)
            out.append(self._transition({**hit, "_row": hit["_row"] - begin}, labels))
        return out, replace_state(state, fired=fired)

    def evaluate_many(self, frame: pl.DataFrame, parts: Sequence[Part]) -> list[Outcome | None]:
        """`evaluate` on each part, the matching, capturing and classifying in one query for
        all (the firing, per label set once a run, over the few first hits)."""
        states = [part.state for part in parts]
        if self.wrapped:
            if self.line_gate is None:
                return [None] * len(parts)
            hits, states = self._wrapped_hits(frame, parts)
        else:
            rows = matching_rows(frame, self.pattern, self.needs.gate)
            hits = rows.rename({"text": "_subject"})
        if hits.is_empty():
            return [([], state) for state in states]
        index = part_of(hits.get_column("_row"), parts)
        hits = self._classified(self._captured(hits.with_columns(index.alias("_part"))))
        hits = with_writers(hits, frame)
        subset = ["_part", *self.label_names, *WRITER_COLUMNS]  # one per rank of a prefixed line
        firsts = hits.unique(subset=subset, keep="first", maintain_order=True)
        by_part: dict[int, list[dict[str, Any]]] = {}
        for hit in firsts.iter_rows(named=True):
            by_part.setdefault(hit["_part"], []).append(hit)
        out: list[Outcome | None] = []
        for number, (part, state) in enumerate(zip(parts, states, strict=True)):
            found = by_part.get(number)
            out.append(([], state) if found is None else self._fired(found, state, part.begin))
        return out

    def _wrapped_hits(
        self, frame: pl.DataFrame, parts: Sequence[Part]
    ) -> tuple[pl.DataFrame, list[dict[str, Any]]]:
        """`_hits` of a wrapped rule with a line gate on every part at once: the hits (`_row`
        of `frame`, `_subject`) and each part's state after them."""
        gate = cast(str, self.line_gate)
        tails = pl.Series([part.state["tail"] for part in parts], dtype=pl.String)
        index = part_of(pl.int_range(frame.height, dtype=pl.UInt32, eager=True), parts)
        begins = pl.Series([part.begin for part in parts], dtype=pl.UInt32)
        texts = frame.select("text").with_row_index("_row")
        ahead = _holds_column(gate)  # computed ahead (`Engine.prepare`) where it was
        holds = pl.col(ahead) if ahead in frame.columns else pl.col("text").str.contains(gate)
        if ahead in frame.columns:
            texts = texts.with_columns(frame.get_column(ahead))
        rows = texts.with_columns(
            index.alias("_part"),
            (pl.col("_row") == begins.gather(index)).alias("_first"),
            tails.gather(index).alias("_tail"),
            pl.Series([bool(p.state["tail_hit"]) for p in parts]).gather(index).alias("_tail_hit"),
            pl.col("text").shift(1).alias("_prev"),
            holds.fill_null(False).alias("_holds"),
            tails.str.contains(gate).gather(index).alias("_tail_gated"),
        )
        near = pl.col("_holds") | pl.when("_first").then("_tail_gated").otherwise(
            pl.col("_holds").shift(1)
        )
        candidates = self._paired(rows.filter(near.fill_null(False)))
        scored = self._joined(candidates)
        last_hit = {row: hit for row, hit in scored.select("_row", "_hit").iter_rows()}
        states = []
        texts_column = frame.get_column("text")
        for part in parts:
            last = texts_column[part.end - 1] or ""
            hit = bool(last_hit.get(part.end - 1, False))
            states.append(replace_state(part.state, tail=last[-TAIL_CHARS:].rstrip(), tail_hit=hit))
        return _found(scored), states

    def _joined(self, candidates: pl.DataFrame) -> pl.DataFrame:
        """`_joined_hits`' scoring of candidate rows of many parts (`_first`, `_tail`,
        `_tail_hit`, `_prev`: each part's carried tail before its first row)."""
        text, prev, first = pl.col("text"), pl.col("_prev"), pl.col("_first")
        hit = text.str.contains(self.pattern)
        tail = (
            pl.when(first)
            .then(pl.col("_tail"))
            .otherwise(prev.str.slice(-TAIL_CHARS).str.strip_chars_end())
        )
        prev_hit = (
            pl.when(first).then(pl.col("_tail_hit")).otherwise(prev.str.contains(self.pattern))
        )
        joined = pl.concat_str(
            tail,
            pl.lit(" "),
            text.str.replace(_CONTINUATION_PREFIX, "").str.slice(0, HEAD_CHARS),
        )
        return candidates.with_columns(
            hit.fill_null(False).alias("_hit"),
            (~hit & ~prev_hit & joined.str.contains(self.pattern)).fill_null(False).alias("_join"),
            joined.alias("_joined"),
        )

    def _hits(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[pl.DataFrame, dict[str, Any]]:
        """The rows that match, each with the text it matched in (`_subject`), and the state."""
        if not self.wrapped:
            rows = matching_rows(frame, self.pattern, self.needs.gate)
            return rows.rename({"text": "_subject"}), state
        gate = self.line_gate
        carried = {
            "_first": pl.col("_row") == 0,
            "_tail": pl.lit(state["tail"], dtype=pl.String),
            "_tail_hit": pl.lit(bool(state["tail_hit"])),
        }
        if gate is None:
            rows = frame.select("text", pl.col("text").shift(1).alias("_prev"))
            found, state = self._joined_hits(
                rows.with_row_index("_row").with_columns(**carried), state
            )
            return found.drop("_kept"), state
        # A line, or a line joined to the one before, can only match where one of the two has a
        # gate literal: the rest need neither the join nor the pattern.
        texts = frame.get_column("text")
        ahead = _holds_column(gate)
        holds = frame.get_column(ahead) if ahead in frame.columns else texts.str.contains(gate)
        tail_gated = _gated(state["tail"], gate)
        if texts.len() and not holds.any() and not tail_gated:
            # no line holds a literal, nor the tail carried in: no match, only the tail moves
            return _NO_HITS, _last_line_carried(state, texts)
        maybe = holds.fill_null(False)
        near = (maybe | maybe.shift(1, fill_value=tail_gated)).arg_true()
        candidates = pl.DataFrame(
            {
                "_row": near,
                "text": texts.gather(near),
                "_prev": texts.gather((near.cast(pl.Int64) - 1).clip(0)),
            }
        ).with_columns(**carried)
        found, new_state = self._joined_hits(self._paired(candidates), state)
        kept = found.get_column("_kept")
        found = found.drop("_kept")
        if frame.is_empty() or (kept.len() and kept[-1] == frame.height - 1):
            return found, new_state
        # the last line lacks the literals, so it cannot match: only its tail is carried
        return found, _last_line_carried(new_state, texts)

    def _paired(self, candidates: pl.DataFrame) -> pl.DataFrame:
        """The candidates where, for some alternative of the pattern, the line and the one
        before it (the carried tail `_tail` before a part's `_first`) hold both literals it
        needs."""
        pairs = gate_pairs(self.pattern, split_on=" ")
        if not pairs or candidates.is_empty():
            return candidates
        text = pl.col("text")
        before = pl.when("_first").then("_tail").otherwise("_prev")

        def either(gate: str) -> pl.Expr:
            return (text.str.contains(gate) | before.str.contains(gate)).fill_null(False)

        return candidates.filter(pl.any_horizontal(either(a) & either(b) for a, b in pairs))

    def _joined_hits(
        self, rows: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[pl.DataFrame, dict[str, Any]]:
        """`rows` (`_row`, `text`, `_prev`: the line before) that match alone or joined to the
        line before (the carried tail for the batch's first line), and the state after the
        last of them; `_kept`: the last row of `rows` (null: none)."""
        if rows.is_empty():
            found = rows.select("_row", pl.col("text").alias("_subject"))
            return found.with_columns(pl.lit(None, dtype=pl.UInt32).alias("_kept")), state
        scored = self._joined(rows)
        last = scored.row(-1, named=True)
        state = replace_state(
            state, tail=(last["text"] or "")[-TAIL_CHARS:].rstrip(), tail_hit=last["_hit"]
        )
        return _found(scored).with_columns(
            pl.lit(last["_row"], dtype=pl.UInt32).alias("_kept")
        ), state

    def _captured(self, hits: pl.DataFrame) -> pl.DataFrame:
        """Hit rows with a column per label and per detail (first detail regex that has it)."""
        subject = pl.col("_subject")
        columns: list[pl.Expr] = [subject.str.extract(self.pattern, 0).alias("_match")]
        if self.label_names:
            columns.append(subject.str.extract_groups(self.pattern).alias("_labels"))
        captured: dict[str, list[pl.Expr]] = {}
        for number, detail in enumerate(self.details):
            groups = pl.col(f"_d{number}")
            columns.append(subject.str.extract_groups(detail).alias(f"_d{number}"))
            for name in _group_names(detail):
                captured.setdefault(name, []).append(groups.struct.field(name))
        out = hits.with_columns(columns)
        if self.label_names:
            out = out.unnest("_labels")
        return out.with_columns(
            pl.coalesce(exprs).alias(f"_detail_{name}") for name, exprs in captured.items()
        )

    def _classified(self, hits: pl.DataFrame) -> pl.DataFrame:
        """Hit rows with the index of the first case that fits (`_case`, null: none), without
        the ignored ones."""
        if not self.cases:
            return hits.with_columns(pl.lit(None, dtype=pl.Int64).alias("_case"))
        chosen: Any = pl.when(self.cases[0].condition()).then(0)
        for number, case in enumerate(self.cases[1:], 1):
            chosen = chosen.when(case.condition()).then(number)
        hits = hits.with_columns(chosen.otherwise(None).cast(pl.Int64).alias("_case"))
        ignored = [number for number, case in enumerate(self.cases) if case.ignore]
        if ignored:
            hits = hits.filter(~pl.col("_case").is_in(ignored).fill_null(False))
        return hits

    def _transition(self, hit: Mapping[str, Any], labels: dict[str, str]) -> Transition:
        fields = {
            key.removeprefix("_detail_"): str(value)
            for key, value in hit.items()
            if key.startswith("_detail_") and value is not None
        }
        case = None if hit["_case"] is None else self.cases[hit["_case"]]
        return Transition(
            row=hit["_row"],
            status=FIRING,
            value=None,
            labels=labels,
            fields=fields,
            override=None if case is None else case.override,
        )


_NO_HITS = pl.DataFrame(schema={"_row": pl.UInt32, "_subject": pl.String})


def _found(scored: pl.DataFrame) -> pl.DataFrame:
    """The scored rows that match, alone or joined, with the text they match in."""
    return scored.filter(pl.col("_hit") | pl.col("_join")).select(
        "_row",
        pl.when(pl.col("_hit")).then(pl.col("text")).otherwise("_joined").alias("_subject"),
    )


def _last_line_carried(state: dict[str, Any], texts: pl.Series) -> dict[str, Any]:
    """The state carrying the tail of the batch's last line, which holds no literal (so it
    matched nothing alone)."""
    last = texts[-1] or ""
    return replace_state(state, tail=last[-TAIL_CHARS:].rstrip(), tail_hit=False)


def _holds_column(gate: str) -> str:
    """The `ahead` column of the lines holding a wrapped rule's line gate."""
    return "_holds " + gate


def _gated(text: str, gate: str | None) -> bool:
    """Whether `text` matches `gate` (no gate: it may match anything)."""
    return gate is None or bool(pl.Series([text]).str.contains(gate)[0])


def _group_names(pattern: str) -> tuple[str, ...]:
    """The named groups of a regex, in order."""
    return tuple(re.compile(pattern).groupindex)


# --- construction from rule-pack parameters --------------------------------------------------

_CASE_KEYS = ("pattern", "labels", "summary", "fix", "severity", "ignore")
_CASE_PATTERN = Param("pattern", Kind.REGEX)


def _case(raw: Any) -> Case:
    """One `[[rule.cases]]` table, typed; ParamError says what is wrong with it."""
    if not isinstance(raw, dict):
        raise ParamError(f"must be a table ([[rule.cases]]), got {raw!r}")
    for key in raw:
        if key not in _CASE_KEYS:
            raise ParamError(f"unknown key {key!r} (expected: {', '.join(_CASE_KEYS)})")
    if "pattern" not in raw and "labels" not in raw:
        raise ParamError("needs a 'pattern' or 'labels' to say which lines it is")
    for key in ("summary", "fix", "severity"):
        if key in raw and not isinstance(raw[key], str):
            raise ParamError(f"{key!r} must be a string, got {raw[key]!r}")
    if not isinstance(raw.get("ignore", False), bool):
        raise ParamError(f"'ignore' must be a boolean (true/false), got {raw['ignore']!r}")
    try:
        severity = Severity.parse(raw["severity"]) if "severity" in raw else None
    except ValueError as exc:
        raise ParamError(str(exc)) from None
    pattern = _CASE_PATTERN.validate(raw.get("pattern"))
    return Case(
        pattern=None if pattern is None else pattern.pattern,
        labels=_case_labels(raw.get("labels", {})),
        override=Override(summary=raw.get("summary"), fix=raw.get("fix"), severity=severity),
        ignore=raw.get("ignore", False),
    )


def _case_labels(raw: Any) -> dict[str, tuple[str, ...]]:
    """`labels = { code = ["13", "43"] }` (or one string) as label -> accepted values."""
    if not isinstance(raw, dict):
        raise ParamError(f"'labels' must be a table such as {{ code = [\"13\"] }}, got {raw!r}")
    out = {}
    for name, values in raw.items():
        listed = [values] if isinstance(values, str) else values
        if not isinstance(listed, list) or not all(isinstance(v, str) for v in listed):
            raise ParamError(f"labels.{name} must be a string or a list of strings, got {values!r}")
        out[name] = tuple(listed)
    return out


def _detail(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ParamError(f"must be a string holding a regex, got {raw!r}")
    pattern = Param("details", Kind.REGEX).validate(raw)
    if not pattern.groupindex:
        raise ParamError(f"{raw!r} has no named group (?P<name>...) to fill a placeholder")
    return str(pattern.pattern)


def _build(params: Mapping[str, Any]) -> Rule:
    pattern = params["pattern"]
    label_names = tuple(pattern.groupindex)
    details: tuple[str, ...] = params["details"] or ()
    cases: tuple[Case, ...] = params["cases"] or ()
    for name in {n for d in details for n in _group_names(d)}:
        if name in _RESERVED or name in label_names:
            what = "a label of 'pattern'" if name in label_names else "a placeholder of its own"
            raise ParamError(f"details group {name!r} is {what}: rename it", name="details")
    for number, case in enumerate(cases, 1):
        unknown = sorted(set(case.labels) - set(label_names))
        if unknown:
            raise ParamError(
                f"cases item {number}: labels {', '.join(unknown)} are not named groups of "
                f"'pattern' (it has: {', '.join(label_names) or 'none'})",
                name="cases",
            )
    return ClassifyRule(
        pattern=pattern.pattern,
        label_names=label_names,
        details=details,
        cases=cases,
        wrapped=params["wrapped"],
    )


def _templates(params: Mapping[str, Any]) -> Templates:
    details: tuple[str, ...] = params["details"] or ()
    cases: tuple[Case, ...] = params["cases"] or ()
    return Templates(
        fields=frozenset(n for d in details for n in _group_names(d)),
        summaries=tuple(
            (f"cases item {number}", case.override.summary)
            for number, case in enumerate(cases, 1)
            if case.override.summary is not None
        ),
    )


CLASSIFY_RULE_TYPES: dict[str, RuleType] = {
    "classify": RuleType(
        (
            Param("pattern", Kind.REGEX, required=True),
            Param("details", Kind.LIST, items=_detail),
            Param("cases", Kind.LIST, items=_case),
            Param("wrapped", Kind.BOOL, default=False),
        ),
        _build,
        _templates,
    ),
}
"""The `classify` rule type (`logwatch.rules.registry` assembles every rule type)."""

__all__ = ["CLASSIFY_RULE_TYPES", "Case", "ClassifyRule"]
