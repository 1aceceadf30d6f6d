"""Summary templates: `{name}` placeholders, and `[?...]` clauses shown only when every
placeholder in them has a value.

`the run crashed[? at step {step}] (line {line})[?: rank {labels.rank} failed first]` reads
`the run crashed (line 9)` on a log with no step and no rank, never `at step ?` or `rank ?`.
Outside a clause a placeholder with no value still shows `?`, so a template that names one
always says so. Clauses do not nest; a `[` or `]` not opening `[?` stays literal text.

A clause may offer alternatives split by `|`, the first whose placeholders all have values
shown: `loss is nan[? at step {step}| at epoch {epoch}] (line 8)` says the epoch on a Hugging
Face line that has no step, and neither where there is none.

`{value:count iteration}` is the value and its noun agreeing: `1 iteration`, `3 iterations`
(`{n:count child/children}` names an irregular plural). It is the only format a placeholder
takes (`COUNT`): values come formatted.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from typing import Any

from logwatch.words import counted

_CLAUSE = re.compile(r"\[\?([^\[\]]*)\]")
_OPEN = "[?"
NO_VALUE = "?"
ALTERNATIVE = "|"
"""Splits an optional clause's alternatives: `[? at step {step}| at epoch {epoch}]`."""
COUNT = "count "
"""A placeholder's format `{value:count iteration}`: the value with its noun, singular or plural."""


class _Missing(Exception):
    """A placeholder of an optional clause has no value: the clause is left out."""


def pieces(template: str) -> list[tuple[str, bool]]:
    """The template as (text, optional) pieces; ValueError for a `[?` not closed or nested."""
    out: list[tuple[str, bool]] = []
    at = 0
    for clause in _CLAUSE.finditer(template):
        out.append((template[at : clause.start()], False))
        out.append((clause.group(1), True))
        at = clause.end()
    out.append((template[at:], False))
    if any(_OPEN in text for text, _ in out):
        raise ValueError(
            f"an optional clause '[?' in summary {template!r} is not closed by ']' or holds "
            "another one (clauses do not nest; write '[?...]' around text and placeholders)"
        )
    return out


class _Filler(string.Formatter):
    """Fills `{name}` from `fields` and `{labels.name}` from `labels`. None or absent is no
    value: `?`, or `_Missing` inside an optional clause (where an empty text is none too)."""

    def __init__(self, fields: Mapping[str, Any], labels: Mapping[str, str]) -> None:
        super().__init__()
        self.fields = fields
        self.labels = labels
        self.optional = False

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        name = field_name.removeprefix("labels.")
        value = self.labels.get(name) if name != field_name else self.fields.get(field_name)
        if self.optional and (value is None or value == ""):
            raise _Missing(field_name)
        if value is None:
            value = NO_VALUE
        return value, field_name

    def format_field(self, value: Any, format_spec: str) -> Any:
        if format_spec.startswith(COUNT):
            if value == NO_VALUE:
                return value
            noun, _, plural_form = format_spec.removeprefix(COUNT).partition("/")
            return counted(value, noun, plural_form or None)
        return super().format_field(value, format_spec)


def fill(template: str, fields: Mapping[str, Any], labels: Mapping[str, str]) -> str:
    """The template with its placeholders filled (values come formatted; None: no value)."""
    filler = _Filler(fields, labels)
    out: list[str] = []
    for text, optional in pieces(template):
        filler.optional = optional
        for choice in text.split(ALTERNATIVE) if optional else [text]:
            try:
                out.append(filler.format(choice))
            except _Missing:
                continue
            break
    return "".join(out)
