"""A case-folded gate literal is spelled by its rarest part: the part found by extending each
start is the one listing, scoring and sorting every part picks."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch.rules.gates import (
    _FOLDS,
    _MAX_SPELLINGS,
    MIN_LITERAL_CHARS,
    Literal,
    _rarity,
    _spellings,
    required_literals,
)
from logwatch.rules.loader import builtin_rules_dir, load_rules
from tests.support.properties import examples

RULES = load_rules([builtin_rules_dir()])


def _reference_spellings(text: str, rank: int) -> list[str] | None:
    """The spellings of the rarest part as gates.py first chose it: every part of the literal
    listed, scored and sorted whole (the slow, obvious way)."""
    if not text.isascii():
        return None

    def count(part: str) -> int:
        return math.prod(len(_FOLDS.get(c.lower(), c)) for c in part)

    parts = sorted(
        (
            (_rarity(text[i : i + size]), -count(text[i : i + size]), i, size)
            for size in range(MIN_LITERAL_CHARS, len(text) + 1)
            for i in range(len(text) - size + 1)
            if count(text[i : i + size]) <= _MAX_SPELLINGS
        ),
        key=lambda p: (p[0], p[1]),
        reverse=True,
    )
    if not parts:
        return None
    _, _, start, size = parts[0]
    if rank:
        apart = [p for p in parts if p[2] + p[3] <= start or p[2] >= start + size]
        _, _, start, size = (apart or parts)[0]
    return [
        "".join(chars)
        for chars in itertools.product(
            *(_FOLDS.get(c.lower(), c) for c in text[start : start + size])
        )
    ]


@settings(max_examples=examples(500), deadline=None)
@given(st.text(alphabet="aAbeEkKsSxXzZ019 _.:=-/é", max_size=40), st.sampled_from([0, 1]))
def test_spellings_pick_the_part_the_full_listing_picks(text: str, rank: int) -> None:
    """The case-folded gate spells the same part as listing and sorting every part would (ties,
    the Kelvin k and long s, digits, blanks and non-ASCII literals included)."""
    assert _spellings(Literal(text, fold=True), rank) == _reference_spellings(text, rank)


def test_spellings_of_the_built_in_rules_literals_are_unchanged() -> None:
    """Every case-folded literal of the built-in patterns gets the spellings it got before."""
    for spec in RULES:
        pattern = getattr(spec.rule, "pattern", None)
        for found in [required_literals(pattern, rank=r) for r in (0, 1)] if pattern else []:
            for lit in found or ():
                for rank in (0, 1):
                    assert _spellings(lit, rank) == _reference_spellings(lit.text, rank)
