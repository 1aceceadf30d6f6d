"""Which line shapes a gate can match: where a long batch's gate scan can pass over rows.

A parse knows each line's shape (`logwatch.parse.shapes`): a line it cut by a shape matches that
shape's anchored pattern. Most of a long run's lines have a shape, and most gates look for words
(`NCCL `, `Traceback`, `out of memory`) that no line of the DFlash step shape can hold: its text
is digits, separators and a few fixed words. So a gate scan need only read the lines without a
shape and those of the shapes the gate can match (`reached`).

A gate can match a line only where the line holds one of the gate's required literals
(`gates.required_literals`). Whether some line of a shape holds a literal is decided on a
superset of the shape's lines: its pattern read as an automaton over characters, with every
bounded repeat read as unbounded and the shape's `forbidden` words ignored. A superset can only
say "maybe" more often, so "no line of this shape can hold it" stays exact. A pattern the
automaton cannot read (a class negated, a Unicode category, a look-around, no anchors at both
ends) reaches every line, and so does a gate without required literals.
"""

from __future__ import annotations

import functools
import itertools
import re
import re._parser as _sre  # type: ignore[import-not-found]  # stdlib, no stubs: Python's own regex parser
from dataclasses import dataclass, field
from re._constants import (  # type: ignore[import-not-found]  # stdlib, no stubs
    AT,
    BRANCH,
    IN,
    LITERAL,
    MAX_REPEAT,
    MIN_REPEAT,
    RANGE,
    SUBPATTERN,
)
from typing import Any

from logwatch.parse.shapes import SHAPES
from logwatch.rules.gates import (
    _FOLDS,
    NEVER,
    Branch,
    Literal,
    Required,
    required_literal_sets,
    required_literals,
)

ANY = frozenset(range(len(SHAPES)))
"""Every shape: what a gate reaches when nothing can be said of it."""

# Each character polars' case-insensitive match takes for an ASCII letter -> all of them
# (`gates._FOLDS`: the letter's two cases, the Kelvin sign with `k`, the long s with `s`).
_FOLDED = {char: frozenset(chars) for chars in _FOLDS.values() for char in chars}


class _Unreadable(Exception):
    """A pattern the automaton does not read."""


@dataclass(slots=True)
class _Automaton:
    """A pattern as a nondeterministic automaton: `edges[state]` are (characters, next state),
    `empty[state]` the states reached with no character; its texts start at state 0."""

    edges: list[list[tuple[frozenset[str], int]]]
    empty: list[list[int]]
    _closures: dict[int, frozenset[int]] = field(default_factory=dict)
    _follows: dict[str, frozenset[str]] | None = None

    def state(self) -> int:
        self.edges.append([])
        self.empty.append([])
        return len(self.edges) - 1

    def closure(self, state: int) -> frozenset[int]:
        """The states reached from `state` with no character (itself included)."""
        found = self._closures.get(state)
        if found is None:
            seen = {state}
            todo = [state]
            while todo:
                for nxt in self.empty[todo.pop()]:
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
            found = self._closures[state] = frozenset(seen)
        return found

    def follows(self) -> dict[str, frozenset[str]]:
        """Each character of some text -> the characters that may come right after it."""
        if self._follows is None:
            after: dict[str, set[str]] = {}
            for edges in self.edges:
                for chars, nxt in edges:
                    out = {c for q in self.closure(nxt) for then, _ in self.edges[q] for c in then}
                    for char in chars:
                        after.setdefault(char, set()).update(out)
            self._follows = {char: frozenset(found) for char, found in after.items()}
        return self._follows


def _automaton(pattern: str) -> _Automaton:
    """`pattern` (anchored at both ends) as an automaton over a superset of its lines."""
    if _class_syntax(pattern):  # classes polars' regex reads otherwise than Python's
        raise _Unreadable(pattern)
    parsed = _sre.parse(pattern)
    if parsed.state.flags & ~int(re.UNICODE):  # ignoring case, verbose, ...: not read
        raise _Unreadable(pattern)
    items = list(parsed)
    if len(items) < 2 or items[0][0] is not AT or items[-1][0] is not AT:
        raise _Unreadable(pattern)
    if str(items[0][1]) != "AT_BEGINNING" or str(items[-1][1]) != "AT_END":
        raise _Unreadable(pattern)
    auto = _Automaton([], [])
    _sequence(auto, items[1:-1], auto.state())
    return auto


def _class_syntax(pattern: str) -> bool:
    """Whether a class of `pattern` holds what polars' (Rust) regex reads as a nested class, a
    POSIX class or a set operation (`[`, `&&`, `--`, `~~`), where Python's reads characters."""
    inside = escaped = False
    start = 0  # where the open class's characters start
    for n, char in enumerate(pattern):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif not inside:
            inside = char == "["
            start = n + 1
        elif char == "[" or pattern[n : n + 2] in ("&&", "--", "~~"):
            return True
        elif char == "]" and n > start + (pattern[start : start + 1] == "^"):
            inside = False
    return inside  # an unclosed class: not read either


def _sequence(auto: _Automaton, items: list[Any], at: int) -> int:
    for op, av in items:
        at = _item(auto, op, av, at)
    return at


def _item(auto: _Automaton, op: Any, av: Any, at: int) -> int:
    if op is LITERAL:
        return _step(auto, at, frozenset(chr(av)))
    if op is IN:
        return _step(auto, at, _charset(av))
    if op is SUBPATTERN:
        _group, add_flags, del_flags, sub = av
        if add_flags or del_flags:
            raise _Unreadable("group flags")
        return _sequence(auto, list(sub), at)
    if op is BRANCH:
        end = auto.state()
        for branch in av[1]:
            auto.empty[_sequence(auto, list(branch), at)].append(end)
        return end
    if op in (MAX_REPEAT, MIN_REPEAT):
        low, _high, sub = av
        if low:
            at = _sequence(auto, list(sub), at)
        # then any number more (a superset of at most `_high - low` more)
        loop = auto.state()
        auto.empty[at].append(loop)
        auto.empty[_sequence(auto, list(sub), loop)].append(loop)
        return loop
    raise _Unreadable(str(op))


def _step(auto: _Automaton, at: int, chars: frozenset[str]) -> int:
    nxt = auto.state()
    auto.edges[at].append((chars, nxt))
    return nxt


def _charset(items: Any) -> frozenset[str]:
    chars: set[str] = set()
    for op, av in items:
        if op is LITERAL:
            chars.add(chr(av))
        elif op is RANGE:
            low, high = av
            if high - low > 255:
                raise _Unreadable("wide range")
            chars.update(chr(c) for c in range(low, high + 1))
        else:  # a negated class, a category: not read
            raise _Unreadable(str(op))
    return frozenset(chars)


def _classes(lit: Literal) -> tuple[frozenset[str], ...]:
    """Each character of a literal as the characters a line may have there."""
    return tuple(_FOLDED.get(c, frozenset(c)) if lit.fold else frozenset(c) for c in lit.text)


@functools.cache
def _shape_automaton(number: int) -> _Automaton | None:
    try:
        return _automaton(SHAPES[number].pattern)
    except (_Unreadable, re.error):
        return None


def holds(auto: _Automaton, lit: Literal) -> bool:
    """Whether some text of the automaton holds `lit` (a breadth-first walk of the automaton
    and how much of the literal the text so far ends with)."""
    if lit.fold and any(c not in _FOLDED and c.lower() != c.upper() for c in lit.text):
        return True  # a letter whose other cases are Unicode's to say: maybe
    classes = _classes(lit)
    if not _may_hold(auto, classes):
        return False
    size = len(classes)
    wanted = frozenset().union(*classes)

    @functools.cache
    def advance(done: int, char: str) -> int:
        # the longest prefix of the literal the text ends with, after `char` (prefixes of
        # equal classes: the literal's own characters stand for the text's)
        for length in range(min(done + 1, size), 0, -1):
            if (
                char in classes[length - 1]
                and classes[done - length + 1 : done] == classes[: length - 1]
            ):
                return length
        return 0

    start = [(state, 0) for state in auto.closure(0)]
    seen = set(start)
    todo = list(start)
    while todo:
        state, done = todo.pop()
        for chars, nxt in auto.edges[state]:
            picks = chars & wanted
            options = {advance(done, c) for c in picks}
            if len(picks) < len(chars):
                options.add(0)
            for got in options:
                if got == size:
                    return True
                for after in auto.closure(nxt):
                    if (after, got) not in seen:
                        seen.add((after, got))
                        todo.append((after, got))
    return False


def _may_hold(auto: _Automaton, classes: tuple[frozenset[str], ...]) -> bool:
    """Whether each two neighbouring characters of the literal may be neighbours in a text of
    the automaton (a quick "no" for most literals; "yes" is decided by `holds`' walk)."""
    follows = auto.follows()
    for first, second in itertools.pairwise(classes):
        if not any(second & follows.get(char, frozenset()) for char in first):
            return False
    return True


@functools.cache
def reached(gate: str) -> frozenset[int]:
    """The shapes (indices in `SHAPES`) some line of which may match `gate`: a gate scan may
    pass over the lines of every other shape."""
    if gate == NEVER:
        return frozenset()
    literals = required_literals(gate)
    return ANY if literals is None else _holding(literals)


@functools.cache
def reached_by(pattern: str, among: frozenset[int] = ANY) -> frozenset[int]:
    """The shapes some line of which may hold a match of `pattern`: a match holds a literal of
    each set the pattern needs, and what one alternative needs of each alternation it needs
    (`gates.required_literal_sets`); a shape no line of which may hold that is not reached.
    Narrower than `reached` of the pattern's gate, one of those sets: `nan-eval-loss`'s gate
    is `loss`, which every Megatron, DFlash step and HF dict line holds, its `val`/`eval`/
    `test` words none. `among`: only these shapes are asked about (the others: not reached)."""
    return _meeting(required_literal_sets(pattern), among) if among else among


def _meeting(required: tuple[Required, ...], among: frozenset[int]) -> frozenset[int]:
    """The shapes of `among` some line of which may hold what `required` needs, each part."""
    for need in required:
        if not among:
            break
        if isinstance(need, Branch):
            among = frozenset().union(*(_meeting(alt, among) for alt in need.alternatives))
        else:
            among = _holding(need, among)
    return among


def _holding(literals: tuple[Literal, ...], among: frozenset[int] = ANY) -> frozenset[int]:
    """The shapes of `among` some line of which may hold one of `literals`."""
    found = set()
    for number in sorted(among):
        auto = _shape_automaton(number)
        if auto is None or any(holds(auto, lit) for lit in literals):
            found.add(number)
    return frozenset(found)


__all__ = ["ANY", "holds", "reached", "reached_by"]
