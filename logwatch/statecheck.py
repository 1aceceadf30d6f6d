"""What a state file read back must hold, checked once at load (one schema per file format).

A state file is valid JSON that logwatch wrote, or one a person edited, a disk damaged, an older
version left. Every field read back goes through `fields` (or `kind_of`) before any use: a
wrongly typed value (a counter that is a string) is a ValueError naming the field, which the
loader turns into "set aside, said once, start afresh", never a traceback at the first use.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

INT: Final = "an integer"
NUMBER: Final = "a number"
STR: Final = "a string"
BOOL: Final = "true or false"
LIST: Final = "a list"
OBJECT: Final = "an object"
TIME: Final = "an ISO 8601 time"
ANY: Final = "any value"


def _is_time(value: Any) -> bool:
    try:
        datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return False
    return True


_CHECKS: dict[str, Callable[[Any], bool]] = {
    INT: lambda v: isinstance(v, int) and not isinstance(v, bool),
    NUMBER: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    STR: lambda v: isinstance(v, str),
    BOOL: lambda v: isinstance(v, bool),
    LIST: lambda v: isinstance(v, list),
    OBJECT: lambda v: isinstance(v, dict),
    TIME: _is_time,
    ANY: lambda v: True,
}

Kind = str
"""One of the constants above; `optional(kind)` also allows null."""


def optional(kind: Kind) -> Kind:
    """`kind`, or null."""
    return kind + " or null"


def is_kind(value: Any, kind: Kind) -> bool:
    """Whether `value` is of `kind`."""
    base, nullable, _ = kind.partition(" or null")
    if value is None:
        return bool(nullable) or base == ANY
    return _CHECKS[base](value)


def kind_of(value: Any, kind: Kind, what: str) -> Any:
    """`value`; ValueError `what: must be <kind>, got <value>` when it is not of `kind`."""
    if not is_kind(value, kind):
        raise ValueError(f"{what}: must be {kind}, got {_shown(value)}")
    return value


def fields(
    data: Any,
    required: Mapping[str, Kind],
    what: str,
    *,
    optional_fields: Mapping[str, Kind] | None = None,
) -> dict[str, Any]:
    """`data` as an object holding every `required` field (and any of `optional_fields`), each
    of its kind; ValueError naming the first missing or wrongly typed one."""
    if not isinstance(data, dict):
        raise ValueError(f"{what}: must be an object, got {_shown(data)}")
    for name, kind in required.items():
        if name not in data:
            raise ValueError(f"{what}: '{name}' is missing")
        kind_of(data[name], kind, f"{what}: '{name}'")
    for name, kind in (optional_fields or {}).items():
        if name in data:
            kind_of(data[name], kind, f"{what}: '{name}'")
    return data


def counts(data: Any, what: str) -> dict[str, int]:
    """An object of string keys to non-negative integers (alert counts by rule)."""
    kind_of(data, OBJECT, what)
    for key, value in data.items():
        if not is_kind(value, INT) or value < 0:
            raise ValueError(f"{what}: '{key}' must be a non-negative integer, got {_shown(value)}")
    return dict(data)


def like(saved: Any, fresh: Any, what: str) -> None:
    """A saved value has the shape of the fresh one it replaces (a rule's state against its
    `initial_state()`): the same keys' JSON kinds, recursively through objects; a fresh null
    takes a number or null (the times and values rules fill in later)."""
    if fresh is None:
        kind_of(saved, optional(NUMBER), what)
    elif isinstance(fresh, bool):
        kind_of(saved, BOOL, what)
    elif isinstance(fresh, int | float):
        kind_of(saved, NUMBER, what)
    elif isinstance(fresh, str):
        kind_of(saved, STR, what)
    elif isinstance(fresh, list):
        kind_of(saved, LIST, what)
    elif isinstance(fresh, dict):
        kind_of(saved, OBJECT, what)
        for key, value in fresh.items():
            if key not in saved:
                raise ValueError(f"{what}: '{key}' is missing")
            like(saved[key], value, f"{what}.{key}")


def _shown(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
