"""Literal gates: from a rule's regex, literals every match contains, as one fast regex.

A gate is exact in one direction only: a line with no gate literal cannot match the pattern, so a
batch without one can be passed over; a line with one may still not match. Rules run the gate
first and their own pattern on the few lines it lets through. The literals come from Python's
regex parser; where Python and polars' (Rust) regex syntax could read a pattern differently, or
a pattern has no literal that every match needs, there is no gate (exact beats fast).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import re._parser as _sre  # type: ignore[import-not-found]  # stdlib, no stubs: Python's own regex parser
import string
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from re._constants import BRANCH, IN, LITERAL, MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT, SUBPATTERN  # type: ignore[import-not-found]  # stdlib, no stubs
from typing import Any

IGNORECASE = int(re.IGNORECASE)
NEVER = r"\b\B"
"""A gate no line matches: for a rule that no batch moves while it is quiet."""

# Syntax that polars' regex reads otherwise than Python's: POSIX and nested classes, class set
# operations (sought with escaped characters taken out: `\[[0-9]` is a literal `[` and a class),
# `\<` / `\>` and `\b{start}` word boundaries. A pattern with any of it gets no gate.
_RUST_ONLY_SETS = re.compile(r"\[:|\[\[|&&|~~|--")
_RUST_ONLY_ESCAPES = re.compile(r"\\[<>]|\\[bB]\{")
_ESCAPED = re.compile(r"\\.", re.S)


def _rust_only(pattern: str) -> bool:
    """Whether `pattern` has syntax polars reads otherwise than Python (see `_RUST_ONLY_SETS`)."""
    return bool(
        _RUST_ONLY_ESCAPES.search(pattern) or _RUST_ONLY_SETS.search(_ESCAPED.sub("", pattern))
    )


# Characters that are syntax in polars' (Rust) regex outside a class: escaped in a gate.
_META = frozenset(r"\.+*?()|[]{}^$#&-~")
# A gate literal shorter than this finds too many lines to be worth a pass of its own.
MIN_LITERAL_CHARS = 3
GOOD_LITERAL_CHARS = 4
# Every character polars' (Unicode) case-insensitive match takes for an ASCII letter:
# `k` is also the Kelvin sign, `s` the long s (tests/rules/test_gates.py checks all of Unicode).
_FOLDS: dict[str, str] = {
    c: c + c.upper() + {"k": "\u212a", "s": "\u017f"}.get(c, "") for c in string.ascii_lowercase
}
_MAX_SPELLINGS = 16
_COMMON = frozenset("etaoinsrhl")


@dataclass(frozen=True, slots=True)
class Literal:
    """A string every match (of some part of a pattern) contains; `fold`: compared ignoring
    case, as the pattern is where it was found."""

    text: str
    fold: bool


def required_literals(
    pattern: str, *, split_on: str = "", rank: int = 0
) -> tuple[Literal, ...] | None:
    """Literals such that every match of `pattern` contains at least one of them (one or a few
    per top-level alternative), or None when the pattern has no such set. `split_on`: characters
    no literal may hold (a literal is cut there), for text joined with them. `rank` 1 takes
    each part's second-best literal where it has two: another set every match needs one of."""
    if _rust_only(pattern):
        return None
    try:
        parsed = _parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    fold = bool(parsed.state.flags & IGNORECASE)
    found = _sequence(list(parsed), fold, split_on, rank)
    if found is None or any(len(lit.text) < MIN_LITERAL_CHARS for lit in found):
        return None
    unique = tuple(dict.fromkeys(found))
    # A literal holding another one finds no line that one does not: the shorter one is enough.
    return tuple(
        lit for lit in unique if not any(_within(other, lit) for other in unique if other != lit)
    )


def _within(small: Literal, big: Literal) -> bool:
    """Whether every text holding `big` holds `small` (told only for ASCII, where lower-casing
    is polars' case folding)."""
    if not small.fold:
        return not big.fold and small.text in big.text
    return small.text.isascii() and big.text.isascii() and small.text.lower() in big.text.lower()


def gate_regex(literals: Sequence[Literal], rank: int = 0, *, whole: bool = False) -> str:
    """One regex matching wherever any of the literals is (ignoring case where it says): plain
    literals only where it can, since polars finds those far faster than case-folded ones.
    `rank` 1 spells a case-folded literal by another part of it than rank 0 where it can.
    `whole`: a case-folded literal is sought whole, `(?i:...)`, not by the spellings of a few
    of its characters: sharper where those few are common (`lloc` of `allocating` is in every
    DFlash snapshot's `alloc_gb=`), and about as fast for one gate of a few literals."""
    plain: list[str] = []
    for lit in literals:
        spellings = [lit.text] if not lit.fold else None if whole else _spellings(lit, rank)
        if spellings is None:
            plain.append(f"(?i:{_escape(lit.text)})")
        else:
            plain.extend(_escape(s) for s in spellings)
    return "|".join(dict.fromkeys(plain))


def _spellings(lit: Literal, rank: int) -> list[str] | None:
    """Every spelling, ignoring case, of a part of a literal (of at least MIN_LITERAL_CHARS, of
    at most _MAX_SPELLINGS spellings, the rarest-looking; with `rank` 1 the rarest that does not
    overlap that one): contains(any spelling) == contains_ignoring_case(part). None for a
    literal with non-ASCII characters (their case is Unicode's to say)."""
    text = lit.text
    if not text.isascii():
        return None
    parts = sorted(_parts(text))
    if not parts:
        return None
    *_, size, start = parts[0]
    if rank:
        apart = [p for p in parts if p[3] + p[2] <= start or p[3] >= start + size]
        *_, size, start = (apart or parts)[0]
    return [
        "".join(chars)
        for chars in itertools.product(
            *(_FOLDS.get(c.lower(), c) for c in text[start : start + size])
        )
    ]


def _parts(text: str) -> Iterator[tuple[int, int, int, int]]:
    """(-rarity, spellings, size, start) of each part of `text` of at least MIN_LITERAL_CHARS
    with at most _MAX_SPELLINGS spellings: sorted, the rarest first, then the fewest spellings,
    then the shortest, then the first. A part's spellings only grow with its end, so each start
    stops at the first end past the limit (a start-up cost: gates are built per rule load)."""
    folds = [len(_FOLDS.get(c.lower(), c)) for c in text]
    weights = [_rarity(c) for c in text]
    for start in range(len(text)):
        count = math.prod(folds[start : start + MIN_LITERAL_CHARS - 1])
        rarity = sum(weights[start : start + MIN_LITERAL_CHARS - 1])
        for end in range(start + MIN_LITERAL_CHARS, len(text) + 1):
            count *= folds[end - 1]
            if count > _MAX_SPELLINGS:
                break
            rarity += weights[end - 1]
            yield -rarity, count, end - start, start


@functools.lru_cache(maxsize=1024)
def gate_for(pattern: str, *, split_on: str = "", rank: int = 0, whole: bool = False) -> str | None:
    """`gate_regex(required_literals(pattern))`, or None without literals."""
    found = required_literals(pattern, split_on=split_on, rank=rank)
    return None if found is None else gate_regex(found, rank, whole=whole)


@functools.lru_cache(maxsize=1024)
def gate_pairs(pattern: str, *, split_on: str = "") -> tuple[tuple[str, str], ...] | None:
    """Per top-level alternative of `pattern`, two gates that each of its matches matches both
    of (two different literals it needs, or two parts of the one it has), or None where one
    has no literal. A text that matches neither gate of some pair cannot match."""
    if required_literals(pattern, split_on=split_on) is None:
        return None
    parsed = _parse(pattern)
    fold = bool(parsed.state.flags & IGNORECASE)
    items = list(parsed)
    branches = (
        [list(b) for b in items[0][1][1]] if len(items) == 1 and items[0][0] is BRANCH else [items]
    )
    pairs = []
    for branch in branches:
        first = _sequence(branch, fold, split_on, 0)
        second = _sequence(branch, fold, split_on, 1)
        if first is None or second is None:
            return None
        pairs.append((gate_regex(first), gate_regex(second, 1 if second == first else 0)))
    return tuple(dict.fromkeys(pairs))


def _parse(pattern: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FutureWarning on `[[`-like sets; no gate for those
        return _sre.parse(pattern)


def _escape(text: str) -> str:
    return "".join("\\" + c if c in _META else c for c in text)


@dataclass(frozen=True, slots=True)
class Branch:
    """An alternation a match needs: what each of its alternatives needs."""

    alternatives: tuple[tuple[Required, ...], ...]


Required = tuple[Literal, ...] | Branch
"""A literal set a match holds one literal of, or an alternation (`required_literal_sets`)."""


def required_literal_sets(pattern: str) -> tuple[Required, ...]:
    """What each match of `pattern` needs, all of it: a literal set (one of its literals) per
    run of literals, a class of a few characters spelling a run each way (`[Vv]al`: `Val` or
    `val`); per alternation, what one of its alternatives needs. Empty where it needs nothing
    or polars could read it otherwise. Read by `reach.reached_by`; gates take one set only."""
    if _rust_only(pattern):
        return ()
    try:
        parsed = _parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return ()
    return tuple(_required(list(parsed), bool(parsed.state.flags & IGNORECASE)))


def _required(items: list[Any], fold: bool) -> list[Required]:
    """What a sequence of parsed items needs (`required_literal_sets`)."""
    found: list[Required] = []
    runs = [""]  # the run of literals so far, in each spelling its classes allow

    def close() -> None:
        nonlocal runs
        if runs[0]:
            found.append(tuple(Literal(run, fold) for run in runs))
        runs = [""]

    for op, av in items:
        chars = [chr(av)] if op is LITERAL else _few_chars(op, av)
        if chars and len(runs) * len(chars) <= _MAX_SPELLINGS:
            runs = [run + char for run in runs for char in chars]
            continue
        close()
        if op is BRANCH:
            alternatives = tuple(tuple(_required(list(branch), fold)) for branch in av[1])
            if all(alternatives):  # an alternative that needs nothing: the branch neither
                found.append(Branch(alternatives))
        elif op is SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            inner = (fold or bool(add_flags & IGNORECASE)) and not bool(del_flags & IGNORECASE)
            found.extend(_required(list(sub), inner))
        elif op in (MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT) and av[0] >= 1:
            found.extend(_required(list(av[2]), fold))
    close()
    return found


def _few_chars(op: Any, av: Any) -> list[str] | None:
    """The characters of a class that lists only characters (`[Vv]`), else None."""
    if op is not IN or any(kind is not LITERAL for kind, _ in av):
        return None
    return sorted({chr(code) for _, code in av})


def _sequence(items: list[Any], fold: bool, split_on: str, rank: int) -> tuple[Literal, ...] | None:
    """The best literal set of a sequence of parsed items: each run of literals and each
    required sub-part offers one; the one whose shortest literal is longest wins."""
    offers: list[tuple[Literal, ...]] = []
    run: list[str] = []

    def close() -> None:
        if run:
            offers.extend((Literal(piece, fold),) for piece in _pieces("".join(run), split_on))
            run.clear()

    for op, av in items:
        if op is LITERAL:
            run.append(chr(av))
            continue
        close()
        offer = _item(op, av, fold, split_on, rank)
        if offer is not None:
            offers.append(offer)
    close()
    ranked = sorted(offers, key=_score, reverse=True)  # stable: the first of equals leads
    return ranked[min(rank, len(ranked) - 1)] if ranked else None


def _item(op: Any, av: Any, fold: bool, split_on: str, rank: int) -> tuple[Literal, ...] | None:
    """The literal set a non-literal item requires (a group, an alternation, a repeat of at
    least one), or None."""
    if op is BRANCH:
        alternatives = [_sequence(list(branch), fold, split_on, rank) for branch in av[1]]
        if any(a is None for a in alternatives):
            return None
        return tuple(lit for a in alternatives if a is not None for lit in a)
    if op is SUBPATTERN:
        _group, add_flags, del_flags, sub = av
        inner = (fold or bool(add_flags & IGNORECASE)) and not bool(del_flags & IGNORECASE)
        return _sequence(list(sub), inner, split_on, rank)
    if op in (MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT) and av[0] >= 1:
        return _sequence(list(av[2]), fold, split_on, rank)
    return None


def _pieces(run: str, split_on: str) -> list[str]:
    if not split_on:
        return [run]
    return [piece for piece in re.split("[" + re.escape(split_on) + "]", run) if piece]


def _score(offer: tuple[Literal, ...]) -> tuple[int, int, int]:
    # Past a few characters a longer literal finds hardly fewer lines, but each more literal
    # is one more to look for: length up to GOOD_LITERAL_CHARS, then fewer, then longer.
    shortest = min(len(lit.text) for lit in offer)
    return (min(shortest, GOOD_LITERAL_CHARS), -len(offer), min(_rarity(lit.text) for lit in offer))


def _rarity(text: str) -> int:
    """How few lines a literal is likely in, roughly: a common letter counts 1, another letter
    2 (capitals too: `CUDA`, `GPU`, `INFO` are everywhere in training logs), a digit or sign 4,
    a blank 0."""
    return sum(
        0 if c == " " else 1 if c.lower() in _COMMON else 2 if c.isalpha() else 4 for c in text
    )


__all__ = [
    "NEVER",
    "Branch",
    "Literal",
    "Required",
    "gate_for",
    "gate_pairs",
    "gate_regex",
    "required_literal_sets",
    "required_literals",
]
