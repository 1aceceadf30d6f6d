"""Counts with their nouns: `1 rule`, `2 rules`, `1 alert event`, `3 oom-kill events`."""

from __future__ import annotations

_IRREGULAR = {"was": "were", "is": "are", "has": "have", "child": "children"}


def plural(noun: str) -> str:
    """The plural of a (last) English noun: `iteration` -> `iterations`, `batch` -> `batches`,
    `retry` -> `retries`; `was` -> `were`."""
    head, _, last = noun.rpartition(" ")
    if last in _IRREGULAR:
        word = _IRREGULAR[last]
    elif last.endswith(("s", "x", "z", "ch", "sh")):
        word = last + "es"
    elif last.endswith("y") and last[-2:-1] not in ("a", "e", "i", "o", "u", ""):
        word = last[:-1] + "ies"
    else:
        word = last + "s"
    return f"{head} {word}" if head else word


def counted(count: int | float | str, noun: str, plural_form: str | None = None) -> str:
    """`count` and its noun agreeing: `1 rule`, `0 rules`, `2 rules` (`plural_form` for the
    plural, else `plural(noun)`). A count given as text (a summary's value) is used as is."""
    one = str(count).strip() in ("1", "1.0", "-1")
    return f"{count} {noun if one else (plural_form or plural(noun))}"
