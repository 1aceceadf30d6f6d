"""Which shapes a gate reaches: no line of a shape a gate does not reach can match it, and a gate
scan told the lines' shapes finds what a scan of every line finds."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from logwatch import api
from logwatch.engine import Engine
from logwatch.parse import parse_block, shapes_giving
from logwatch.parse.shapes import SHAPES
from logwatch.rules.gates import NEVER, Branch, Literal, gate_for, required_literal_sets
from logwatch.rules.nonfinite import NONFINITE_GATE
from logwatch.rules.reach import (
    ANY,
    _automaton,
    _shape_automaton,
    _Unreadable,
    holds,
    reached,
    reached_by,
)
from tests.support.properties import examples
from tests.test_shapes import MIXED_LINES

SHAPE = {shape.name: number for number, shape in enumerate(SHAPES)}
SLOW = settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def pieces(draw: st.DrawFn) -> tuple[int, str, str]:
    """A shape, a line of its pattern and a piece of that line."""
    number = draw(st.sampled_from(range(len(SHAPES))))
    line = draw(
        st.from_regex(SHAPES[number].pattern, fullmatch=True, alphabet=st.characters(codec="ascii"))
    )
    start = draw(st.integers(0, max(len(line) - 3, 0)))
    size = draw(st.integers(3, 12))
    return number, line, line[start : start + size]


@SLOW
@given(pieces(), st.randoms(use_true_random=False))
def test_every_piece_of_a_line_of_a_shape_is_one_its_lines_can_hold(
    found: tuple[int, str, str], rnd: object
) -> None:
    number, line, piece = found
    assert pl.Series([line]).str.contains(SHAPES[number].pattern).item()  # polars reads it so too
    auto = _shape_automaton(number)
    assert auto is not None
    assert holds(auto, Literal(piece, fold=False)), (SHAPES[number].name, piece)
    assert holds(auto, Literal(piece.swapcase(), fold=True)), (SHAPES[number].name, piece)


def test_gates_reach_only_the_shapes_whose_lines_can_hold_them() -> None:
    snapshot, step, hf = SHAPE["dflash-snapshot"], SHAPE["dflash-step"], SHAPE["hf-dict"]
    assert all(_shape_automaton(number) is not None for number in range(len(SHAPES)))
    # a snapshot key may be `nccl/...`, a data loader's shard path `/nccl/...`
    assert reached("NCCL |nccl") == {snapshot, SHAPE["dflash-data"]}
    assert reached("Traceback") == frozenset()  # no shape has an upper-case T there
    assert reached(r"NVRM: Xid \(") == frozenset()
    assert {step, hf, snapshot} <= reached("grad_norm")
    assert step in reached("(?i)warning")  # the level of a step line
    assert step not in reached("warning")
    assert reached(NEVER) == frozenset()
    assert reached(r"[0-9]+") == ANY  # no literal: every line may match
    assert reached(NONFINITE_GATE) == ANY


def test_a_rule_reaches_only_the_shapes_on_which_its_pattern_can_match() -> None:
    """nan-eval-loss's gate (`loss`) is on every step, HF and Megatron iteration line; its
    `val`/`eval`/`test`/`dev` words, which a match needs too, on none of them."""
    pattern = next(
        s.rule.pattern for s in api.load_rules([], builtin=True) if s.id == "nan-eval-loss"
    )
    lines = {"dflash-step", "hf-dict", "megatron-iteration", "megatron-skipped"}
    assert {SHAPE[name] for name in lines} <= reached(gate_for(pattern))
    assert not {SHAPE[name] for name in lines} & reached_by(pattern)
    assert SHAPE["dflash-snapshot"] in reached_by(pattern)  # a key may be `val_loss/...`
    # a class of a few letters spelled out: `global` holds `al`, no Megatron line `Val`/`val`
    assert SHAPE["megatron-iteration"] in reached_by("al")
    assert SHAPE["megatron-iteration"] not in reached_by("[Vv]al")
    assert reached_by(r"[0-9]+") == ANY  # no literal: every line may match
    # an alternation needs one alternative's literals, all of them: Xid 79 is `Xid (` and `): 79`
    # (the gate has `): 79` alone, which a Megatron line's `(ms): 79.5` holds)
    gpu_lost = next(s.rule.pattern for s in api.load_rules([], builtin=True) if s.id == "gpu-lost")
    assert SHAPE["megatron-iteration"] in reached(gate_for(gpu_lost))
    assert SHAPE["megatron-iteration"] not in reached_by(gpu_lost)
    assert isinstance(required_literal_sets(gpu_lost)[0], Branch)
    assert reached_by(r"Xid \(|\(ms\): ") >= {SHAPE["megatron-iteration"]}  # one alternative may


def test_a_rule_that_moves_on_values_only_skips_shapes_without_them() -> None:
    assert SHAPE["dflash-snapshot"] not in shapes_giving({"loss"})
    assert SHAPE["dflash-queue"] not in shapes_giving({"grad_norm"})
    assert {SHAPE["dflash-step"], SHAPE["hf-dict"]} <= shapes_giving({"loss"})
    assert shapes_giving({"snapshot"}) == ANY  # a flag is false, not null, off its shape
    assert shapes_giving({"q_hsb_nonzero"}) == ANY  # derived: not said


ENGINE = Engine(api.load_rules([], builtin=True), stats=False)
PATTERNS: dict[str, list[str]] = {}
"""Each gate -> the patterns of the rules behind it that say one (`Needs.pattern`)."""
for _spec in ENGINE.rules:
    _needs = getattr(_spec.rule, "needs", None)
    if _needs is not None and _needs.gate is not None and _needs.pattern is not None:
        PATTERNS.setdefault(_needs.gate, []).append(_needs.pattern)
# Lines of the shapes that hold the built-in gates' words where a shape allows them (snapshot
# keys) and lines that hold them off any shape.
GATE_WORDS = ["nccl", "exit", "overflow", "nvml", "modu", "gpu i", "inimum", "validation"]
WORDY = st.one_of(
    st.tuples(st.sampled_from(GATE_WORDS), st.integers(0, 9)).map(
        lambda w: (
            f"2026-11-28 14:09:05,117 INFO [wandb] snapshot step=5 "
            f"{w[0].replace(' ', '_')}/{w[1]}=1 gpu/0/util=3"
        )
    ),
    st.sampled_from(GATE_WORDS).map(lambda w: f"2026-11-28 14:09:05,117 ERROR {w} NCCL error"),
    st.just(
        "2026-11-28 14:09:05,117 INFO [train] step 9/10 | loss nan | acc 0.1 | lr 1e-05 "
        "| grad_norm inf | tok/s 5 | q_hs=1 q_hsb=[1]"
    ),
)


@SLOW
@given(
    st.lists(st.one_of(MIXED_LINES, st.lists(WORDY, min_size=1, max_size=5))).map(
        lambda parts: [line for part in parts for line in part]
    )
)
def test_a_scan_told_the_shapes_finds_what_a_scan_of_every_line_finds(lines: list[str]) -> None:
    lines = [line.replace("\n", " ").replace("\r", " ") for line in lines] * 20  # not a live batch
    if not lines:
        return
    text = pl.Series("text", lines, dtype=pl.String)
    block = parse_block(text, source="s", first_line=1, default_year=2026, columns=ENGINE.columns)
    told = ENGINE.prepare(block.frame, ENGINE.columns, shapes=block.shapes)
    every = ENGINE.prepare(block.frame, ENGINE.columns)
    assert told is not None and every is not None
    valued = {NONFINITE_GATE: ("loss", "grad_norm")}
    for gate, rows in every.hits.items():
        found = told.hits[gate].to_list()
        if gate not in valued and gate not in PATTERNS:
            assert found == rows.to_list(), gate
            continue
        # passed over: only lines on which no rule behind the gate has a value to move on, or
        # that no pattern of a rule behind it matches
        assert set(found) <= set(rows.to_list())
        skipped = sorted(set(rows.to_list()) - set(found))
        if skipped and gate in valued:
            parsed = parse_block(text, source="s", first_line=1, default_year=2026).frame
            values = parsed.select(valued[gate]).gather(skipped)
            assert values.null_count().sum_horizontal().item() == 2 * len(skipped), gate
        for pattern in PATTERNS.get(gate, []) if skipped else []:
            assert not text.gather(skipped).str.contains(pattern).any(), (gate, pattern)
    assert told.ahead is not None and every.ahead is not None
    assert_frame_equal(told.ahead, every.ahead)


def test_a_pattern_the_automaton_does_not_read_reaches_every_line() -> None:
    for pattern in (
        r"^[[:alpha:]]+$",  # POSIX class: polars reads it, Python reads `[`, `:`, ...
        r"^[a-z&&b]x$",  # class intersection in polars
        r"(?i)^abc$",  # case ignored throughout
        r"^[^a]bc$",  # negated class
        r"abc$",  # not anchored at the start
        r"^\dabc$",  # a Unicode category
    ):
        with pytest.raises(_Unreadable):
            _automaton(pattern)


def test_a_rule_moving_on_a_column_the_engine_fills_reads_every_shape() -> None:
    from logwatch.engine.plan import _gate_reach, _Needs

    def quiet(state: dict[str, object]) -> bool:
        return True

    step = _Needs(
        frozenset({"step"}), frozenset(), NONFINITE_GATE, quiet, valued=frozenset({"step"})
    )
    loss = _Needs(frozenset({"loss"}), frozenset(), "grad_norm", quiet, valued=frozenset({"loss"}))
    assert _gate_reach([step])[NONFINITE_GATE] == ANY  # the engine forward-fills the step
    assert _gate_reach([loss])["grad_norm"] == reached("grad_norm") & shapes_giving({"loss"})
