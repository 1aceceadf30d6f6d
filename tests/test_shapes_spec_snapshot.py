"""The `dflash-snapshot-spec` shape: a narrowing of `dflash-snapshot` to the keys DFlash's
script writes, so that gate scans can pass over its lines. Each of its lines is a
`dflash-snapshot` line cut the same way, and the built-in gates reach none of them."""

from __future__ import annotations

from typing import cast

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logwatch import api
from logwatch.engine import Engine
from logwatch.parse import shape_of, shapes_giving
from logwatch.parse.shapes import _INT, _SNAPSHOT_FORBIDDEN, SHAPES, SPEC_SNAPSHOT_PAIR
from logwatch.rules.gates import Literal
from logwatch.rules.nonfinite import NONFINITE_GATE
from logwatch.rules.reach import _automaton, holds, reached
from tests.support.properties import examples
from tests.test_shapes import both_ways

SHAPE = {shape.name: number for number, shape in enumerate(SHAPES)}
SPEC, SNAPSHOT = SHAPES[SHAPE["dflash-snapshot-spec"]], SHAPES[SHAPE["dflash-snapshot"]]
SETTINGS = settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
SPEC_LINES = st.from_regex(SPEC.pattern, fullmatch=True, alphabet=st.characters(codec="ascii"))


def _accepts(shape_number: int, lines: list[str]) -> list[bool]:
    frame = pl.DataFrame({"text": lines}, schema={"text": pl.String})
    return frame.select(SHAPES[shape_number].accepts()).to_series().to_list()


def test_it_is_the_snapshot_shape_but_for_its_pattern() -> None:
    """Same literal, cuts, constants, counts and plain pairs: the same values on its lines."""
    assert SHAPE["dflash-snapshot-spec"] < SHAPE["dflash-snapshot"]  # tried first
    assert SPEC.literal == SNAPSHOT.literal and SPEC.cuts == SNAPSHOT.cuts
    assert SPEC.constants == SNAPSHOT.constants and SPEC.counts == SNAPSHOT.counts
    assert SPEC.general == SNAPSHOT.general and SPEC.plain_pairs == SNAPSHOT.plain_pairs
    assert (SPEC.tokens, SPEC.forbidden) == (SNAPSHOT.tokens, None)


@SETTINGS
@given(st.lists(SPEC_LINES, min_size=1, max_size=20))
def test_each_of_its_lines_is_a_snapshot_line_with_the_general_values(lines: list[str]) -> None:
    assert all(_accepts(SHAPE["dflash-snapshot"], lines))
    which = shape_of(pl.Series(lines, dtype=pl.String))
    assert which is not None and which.to_list() == [SHAPE["dflash-snapshot-spec"]] * len(lines)
    both_ways(lines)


def test_no_forbidden_word_can_follow_its_literal() -> None:
    """`dflash-snapshot`'s `forbidden` words are read after its literal: on a line of this
    pattern that is the step's digits and the pairs, none of which can hold one (so the
    shape needs no `forbidden` pass)."""
    rest = _automaton("^" + _INT + "(?:" + SPEC_SNAPSHOT_PAIR + ")*$")
    words = _SNAPSHOT_FORBIDDEN.split("|")
    plain = [word for word in words if not set(word) & set(".*+?()[]\\")]
    assert set(words) - set(plain) == {"step.*step"}
    for word in [*plain, "step"]:
        assert not holds(rest, Literal(word, fold=False)), word


def test_a_snapshot_with_another_key_is_left_to_the_snapshot_shape() -> None:
    head = "2026-11-28 14:10:00,002 INFO [wandb] snapshot step=150"
    lines = [
        f"{head} gpu/0/util=98 cuda/alloc_gb=61.2",
        f"{head} sys/disk_gb=8.1 gpu/0/util=98",  # a word not DFlash's
        f"{head} gpu/0/util=98 prof/drafter_ms=nan",  # not a plain decimal
        f"{head} train/loss=2.5",  # a word the general path reads: neither shape
    ]
    which = shape_of(pl.Series(lines, dtype=pl.String))
    assert which is not None
    assert which.to_list() == [SHAPE["dflash-snapshot-spec"], SHAPE["dflash-snapshot"], None, None]


def test_no_built_in_gate_reaches_its_lines() -> None:
    """What the shape is for: the built-in rules' gate scans and `ahead` columns pass over
    these lines (a scan told the shapes finds what a scan of every line finds:
    `tests/rules/test_reach.py`)."""
    engine = Engine(api.load_rules([], builtin=True), stats=False)
    gates = {spec.rule.needs.gate for spec in engine.rules} - {None, NONFINITE_GATE}
    assert len(gates) > 5
    for gate in gates:
        assert SHAPE["dflash-snapshot-spec"] not in reached(cast(str, gate)), gate
    # the non-finite gate (no literal) is read on the lines of the shapes that give a value
    # its rules read, and this shape gives none
    assert SHAPE["dflash-snapshot-spec"] not in shapes_giving({"loss", "grad_norm"})
    assert SHAPE["dflash-snapshot"] in reached("nccl")  # a key of any word may hold it
