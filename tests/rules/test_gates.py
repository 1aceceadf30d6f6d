"""Rule gates are exact: a line a rule fires on, or moves its state on, matches the rule's gate;
and rules that skip work behind their gates give the same transitions and states as before."""

from __future__ import annotations

import itertools
import tomllib
from pathlib import Path
from typing import Any, cast

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch.parse import parse_lines
from logwatch.rules.base import Gated, matching_rows, replace_state
from logwatch.rules.classify import _CONTINUATION_PREFIX, HEAD_CHARS, TAIL_CHARS, ClassifyRule
from logwatch.rules.gates import (
    _FOLDS,
    Branch,
    Required,
    gate_for,
    gate_pairs,
    gate_regex,
    required_literal_sets,
)
from logwatch.rules.loader import builtin_rules_dir, load_rules
from logwatch.rules.log import MatchRule
from logwatch.rules.nonfinite import NONFINITE_GATE, NONFINITE_ROWS, NonFiniteRule
from tests.support.properties import examples

ROOT = Path(__file__).resolve().parents[2]
RULES = load_rules([builtin_rules_dir()])


def _corpus() -> list[str]:
    lines: list[str] = []
    for path in sorted((ROOT / "samples").glob("*/*.log")):
        lines += path.read_text(errors="replace").splitlines()[:400]
    for path in sorted((ROOT / "tests" / "data").glob("*.toml")):
        for table in tomllib.loads(path.read_text()).values():
            for item in table if isinstance(table, list) else []:
                for key in ("text", "line"):
                    if isinstance(item.get(key), str):
                        lines += item[key].splitlines()
    return [line for line in lines if line]


CORPUS = _corpus()
# Messages wrapped over two lines (failures.toml), kept together, and cut by hand where a
# literal the gate might use would straddle the join.
WRAPPED = [
    *(
        item["text"].splitlines()
        for item in tomllib.loads((ROOT / "tests/data/failures.toml").read_text())["line"]
        if "\n" in item["text"]
    ),
    ["RuntimeError: CUDA out of memo", "ry. Tried to allocate 2.00 MiB"],
    ["RuntimeError: CUDA", "out of memory. Tried to allocate 2.00 MiB"],
    ["[rank0]: torch.OutOfMemoryError: CUDA out", "[rank0]: of memory."],
]
NUMBERS = st.sampled_from(
    [
        "nan",
        "NaN",
        "-nan",
        "INF",
        "-Infinity",
        "inf.0",
        "1e400",
        "1" * 400,
        "1.8e308",
        "9e99",
        "3.5",
    ]
)
LINES = st.one_of(
    st.sampled_from(CORPUS),
    st.builds(
        lambda k, v: f"step 3 | {k} {v} | lr {v}", st.sampled_from(["loss", "grad_norm"]), NUMBERS
    ),
    st.builds(lambda a, b: a + b, st.sampled_from(CORPUS), st.sampled_from(CORPUS)),
)


def test_folds_are_every_character_a_case_insensitive_letter_matches() -> None:
    """The spellings a case-folded gate lists are all the characters polars' `(?i)` takes for an
    ASCII letter (the Kelvin sign for k, the long s for s): none is missed."""
    every = pl.Series([chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000])
    for letter, spellings in _FOLDS.items():
        found = every.filter(every.str.contains(f"(?i)^{letter}$")).to_list()
        assert sorted(found) == sorted(spellings), letter


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(LINES, min_size=1, max_size=30))
def test_nonfinite_values_are_on_gated_lines(lines: list[str]) -> None:
    """Every line the parser gives a non-finite loss, grad norm or lr (NaN in any casing,
    overflowing numbers such as 1e400 or 400 digits) matches the nonfinite gate, and is a line
    the gate's cheaper expression (`NONFINITE_ROWS`, what the engine runs) selects."""
    frame = parse_lines(pl.Series(lines), source="t", first_line=1, default_year=2026)
    for column in ("loss", "grad_norm", "lr"):
        bad = frame.filter(pl.col(column).is_not_null() & ~pl.col(column).is_finite())
        assert bad.get_column("text").str.contains(NONFINITE_GATE).all(), column
        assert bad.select(NONFINITE_ROWS.all()).item(), column


def test_the_cheaper_nonfinite_expression_finds_what_the_gate_finds_on_real_lines() -> None:
    """On the corpus lines, `NONFINITE_ROWS` selects every line `NONFINITE_GATE` selects, and
    next to none it does not (it is a gate: a line it lets through is parsed)."""
    lines = pl.Series([*CORPUS, "1" * 400, "x=" + "7" * 250, "loss 1e400", "loss 1E+999"])
    frame = pl.DataFrame({"text": lines})
    regex = frame.select(pl.col("text").str.contains(NONFINITE_GATE)).to_series()
    cheaper = frame.select(NONFINITE_ROWS).to_series()
    assert not (regex & ~cheaper).any()
    assert (cheaper & ~regex).sum() <= lines.len() // 20


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(LINES, min_size=1, max_size=40))
def test_a_quiet_rule_moves_only_on_gated_lines(lines: list[str]) -> None:
    """For every built-in log rule with a gate: one line that fires it or changes its quiet
    state matches the gate."""
    frame = parse_lines(pl.Series(lines), source="t", first_line=1, default_year=2026)
    for spec in RULES:
        rule = spec.rule
        if not isinstance(rule, Gated) or rule.needs.gate is None:
            continue
        start = rule.initial_state()
        if not rule.quiet(start):
            start = {**start, "progress": True}  # halving: quiet once the run made progress
        assert rule.quiet(start), spec.id
        for row in range(frame.height):
            found, after = rule.evaluate(frame.slice(row, 1), start)
            if found or after != start:
                assert frame.get_column("text")[row] is not None
                assert pl.Series([frame["text"][row]]).str.contains(rule.needs.gate)[0], spec.id


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.one_of(LINES.map(lambda line: [line]), st.sampled_from(WRAPPED)), min_size=1),
    st.lists(st.integers(1, 59), max_size=4),
)
def test_gated_classify_matches_the_reference(chunks: list[list[str]], cuts: list[int]) -> None:
    """Every match and classify rule finds, over any cut of the lines into batches, the hits and
    states of the pattern run on every row (the logic before gates)."""
    lines = [line for chunk in chunks for line in chunk][:60]
    frame = parse_lines(pl.Series(lines), source="t", first_line=1, default_year=2026)
    bounds = sorted({0, frame.height, *(c for c in cuts if c < frame.height)})
    for spec in RULES:
        rule = spec.rule
        if isinstance(rule, MatchRule):  # the rows its gate lets through and the pattern takes
            plain = frame.select("text").with_row_index("_row")
            expected = plain.filter(pl.col("text").str.contains(rule.pattern))
            got = matching_rows(frame, rule.pattern, rule.needs.gate)
            assert got.to_dicts() == expected.to_dicts(), spec.id
        if not isinstance(rule, ClassifyRule):
            continue
        state = rule.initial_state()
        for a, b in itertools.pairwise(bounds):
            batch = frame.slice(a, b - a)
            hits, new_state = rule._hits(batch, state)
            ref_hits, ref_state = _reference_hits(rule, batch, state)
            assert hits.to_dicts() == ref_hits.to_dicts(), spec.id
            assert new_state == ref_state, spec.id
            state = new_state


def _reference_hits(
    rule: ClassifyRule, frame: pl.DataFrame, state: dict[str, Any]
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """ClassifyRule._hits before gates: the pattern and the join on every row."""
    text = pl.col("text")
    hit = text.str.contains(rule.pattern)
    if not rule.wrapped:
        rows = frame.select("text").with_row_index("_row").filter(hit.fill_null(False))
        return rows.rename({"text": "_subject"}), state
    tail = text.str.slice(-TAIL_CHARS).str.strip_chars_end()
    joined = pl.concat_str(
        tail.shift(1, fill_value=pl.lit(state["tail"])),
        pl.lit(" "),
        text.str.replace(_CONTINUATION_PREFIX, "").str.slice(0, HEAD_CHARS),
    )
    prev_hit = hit.shift(1, fill_value=pl.lit(bool(state["tail_hit"])))
    scored = frame.select(
        hit.fill_null(False).alias("_hit"),
        (~hit & ~prev_hit & joined.str.contains(rule.pattern)).fill_null(False).alias("_join"),
        text,
        joined.alias("_joined"),
    ).with_row_index("_row")
    last = scored.row(-1, named=True)
    state = replace_state(
        state, tail=(last["text"] or "")[-TAIL_CHARS:].rstrip(), tail_hit=last["_hit"]
    )
    rows = scored.filter(pl.col("_hit") | pl.col("_join")).select(
        "_row",
        pl.when(pl.col("_hit")).then(pl.col("text")).otherwise("_joined").alias("_subject"),
    )
    return rows, state


def test_gate_literals_of_an_alternation_and_of_a_wrapped_message() -> None:
    """A gate is one literal per alternative; for a wrapped rule none holds the blank the join
    inserts, so `CUDA out of` / `memory.` cut over two lines still passes the gate."""
    assert gate_for("foo bar|ba[zy]qux") == "foo bar|qux"
    assert gate_for(r"\d+|[ab]c") is None  # no literal every match needs
    wrapped = gate_for("CUDA out of memory", split_on=" ")
    assert wrapped is not None and " " not in wrapped
    assert pl.Series(["CUDA out of", "memory."]).str.contains(wrapped).any()
    assert NonFiniteRule("loss").needs.columns == frozenset({"loss", "rank"})


def test_an_escaped_bracket_before_a_class_keeps_the_gate() -> None:
    """`\\[[0-9, ]*\\]` is a literal `[` and a class, not Rust's nested class: the pattern keeps
    its gate (without one, a wrapped rule joins and searches every line of every batch), while
    a real nested or POSIX class still has none."""
    assert gate_for(r"with shape \[[\d, ]*\]") == r"with shape \["
    assert gate_for(r"with shape [[a-z]]") is None
    assert gate_for(r"with shape [[:digit:]]") is None


def test_every_builtin_classify_rule_has_a_line_gate() -> None:
    """No built-in classify rule reads every line: each has literals a matching line holds."""
    rules = [
        spec for spec in load_rules([builtin_rules_dir()]) if isinstance(spec.rule, ClassifyRule)
    ]
    assert rules
    assert [spec.id for spec in rules if spec.rule.line_gate is None] == []


def test_a_wrapped_rules_line_gate_seeks_its_folded_literals_whole() -> None:
    """cuda-oom's line gate passes by a DFlash snapshot (`cuda/alloc_gb=` holds `lloc` of
    `allocating`, the spelled part of that literal), and still takes, in any casing, the half
    of a wrapped message that holds a literal (the line after `CUDA out of`, here)."""
    spec = next(spec for spec in RULES if spec.id == "cuda-oom")
    gate = cast(ClassifyRule, spec.rule).line_gate
    assert gate is not None
    snapshot = "INFO [wandb] snapshot step=2 cuda/alloc_gb=63.8 cuda/reserved_gb=68.0"
    assert not _matches(gate, snapshot)
    for line in (
        "MEMORY. Tried to allocate",
        "when ALLOCATING tensor",
        "CUBLAS_status_ALLOC_failed",
    ):
        assert _matches(gate, line), line


def _recased(line: str, flips: list[bool]) -> str:
    cycle = itertools.islice(itertools.cycle(flips), len(line))
    return "".join(c.swapcase() if flip else c for c, flip in zip(line, cycle, strict=True))


@settings(max_examples=examples(300), deadline=None)
@given(
    st.sampled_from(CORPUS),
    st.lists(st.booleans(), min_size=1, max_size=7),
    st.sampled_from([("", ""), ("k", "\u212a"), ("s", "\u017f"), ("S", "\u017f"), ("e", "é")]),
)
def test_a_line_a_pattern_matches_matches_its_gates(
    line: str, flips: list[bool], swap: tuple[str, str]
) -> None:
    """Whatever the casing (Kelvin sign and long s included), a line that a built-in match or
    classify pattern matches matches its gate, its wrapped-line gate, one of its pairs and a
    literal of each set the pattern needs (`required_literal_sets`, which the reach reads)."""
    text = _recased(line, flips).replace(*swap) if swap[0] else _recased(line, flips)
    for spec in RULES:
        rule = spec.rule
        pattern = getattr(rule, "pattern", None)
        if not isinstance(pattern, str) or not _matches(pattern, text):
            continue
        gates = [rule.needs.gate, gate_for(pattern, split_on=" "), getattr(rule, "line_gate", None)]
        for gate in gates:
            assert gate is None or _matches(gate, text), (spec.id, gate)
        pairs = gate_pairs(pattern, split_on=" ")
        assert pairs is None or any(_matches(a, text) and _matches(b, text) for a, b in pairs)
        for need in required_literal_sets(pattern):
            assert _holds_needed(need, text), (spec.id, need)


def _holds_needed(need: Required, text: str) -> bool:
    """Whether `text` holds what one part of `required_literal_sets` says a match needs."""
    if isinstance(need, Branch):
        return any(all(_holds_needed(n, text) for n in alt) for alt in need.alternatives)
    return _matches(gate_regex(need, whole=True), text)


def _matches(regex: str, text: str) -> bool:
    return bool(pl.Series([text]).str.contains(regex)[0])


MEGATRON = (
    " iteration      100/  1000 | consumed samples:  51200 | elapsed time per iteration (ms):"
    " 3591.8 | learning rate: 1.500E-04 | global batch size:   512 | lm loss: {loss} | loss"
    " scale: 65536.0 | grad norm: {grad} | number of skipped iterations:   0 | number of nan"
    " iterations:   {nan} |"
)
AFTER_NUMBER_OF = [
    "number of {v} iterations: 1",
    "loss number of {v}",
    "grad_norm: number of {v} | lr=number of {v}",
    "{{'loss': 1.0, 'number of {v}': 2}}",
    "step 3 | loss 1.0 | grad_norm 2.0 | number of {v}",
]


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "Infinity", "nan,", "INF|"])
def test_no_value_follows_number_of_so_the_gate_passes_it_by(value: str) -> None:
    """Megatron's `number of nan iterations:` count is on every iteration line: the parser
    reads no value after `number of `, and the nonfinite gate does not open on it, so a
    healthy Megatron log is not read line by line by the NaN rules."""
    lines = [MEGATRON.format(loss="2.187573E+00", grad="1.349", nan=0)]
    lines += [line.format(v=value) for line in AFTER_NUMBER_OF]
    frame = parse_lines(pl.Series(lines), source="t", first_line=1, default_year=2026)
    for column in ("loss", "grad_norm", "lr", "throughput", "epoch"):
        values = frame.get_column(column).drop_nulls()
        assert values.is_finite().all(), column
    assert not frame.select(NONFINITE_ROWS.any()).item()
    bad = [
        MEGATRON.format(loss="NAN", grad="nan", nan=1),
        MEGATRON.format(loss="2.1", grad="inf", nan=0),
    ]
    assert pl.DataFrame({"text": bad}).select(NONFINITE_ROWS.all()).item()


def test_healthy_megatron_lines_are_not_searched_for_a_non_finite_sub_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The search for a non-finite value of another loss key on the line (`image_loss 5.0 /
    model_loss inf`) runs only on lines that spell one: Megatron's iteration lines all say
    `nan` (in `number of nan iterations:`), and none of them is searched; a NaN one is."""
    import logwatch.parse.general as general

    def fails_where_run() -> pl.Expr:
        return pl.col("text").cast(pl.Int64, strict=True)  # raises on any line it reads

    # the general path builds its extractors once (`_built`): swap the builder, empty the cache
    monkeypatch.setitem(general._BUILDERS, "_nonfinite_loss", fails_where_run)
    general._built.cache_clear()
    try:
        healthy = [MEGATRON.format(loss=f"2.{i}E+00", grad="1.3", nan=0) for i in range(40)]
        frame = parse_lines(pl.Series(healthy), source="t", first_line=1, default_year=2026)
        assert frame.get_column("loss").is_finite().all()
        with pytest.raises(pl.exceptions.InvalidOperationError):
            sick = [*healthy, MEGATRON.format(loss="2.0 | mtp loss: nan", grad="1.3", nan=0)]
            parse_lines(pl.Series(sick), source="t", first_line=1, default_year=2026)
    finally:
        general._built.cache_clear()  # the failing extractor must not outlive the test
