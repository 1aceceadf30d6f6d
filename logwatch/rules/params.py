"""Typed rule parameters: each rule type declares its parameters once, as `Param`s, and a raw
TOML value is validated against one once, at load time, into the value its builder takes."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import Enum
from typing import Any

import polars as pl

from logwatch.durations import parse_duration


class Kind(Enum):
    """What a parameter holds: (the type name pack errors use, the noun config errors use)."""

    INT = ("int", "an integer")
    FLOAT = ("float", "a number")
    DURATION = ("str", "a duration string such as '30s' or '10m'")
    SQL = ("str", "a string holding an SQL expression")
    REGEX = ("str", "a string holding a regex")
    STRING = ("str", "a string")
    BOOL = ("bool", "a boolean (true/false)")
    LIST = ("list", "a list")

    @property
    def toml(self) -> str:
        """The Python name of the TOML type a pack must write."""
        return self.value[0]

    @property
    def noun(self) -> str:
        """What a value of this kind is, in words, with its article."""
        return self.value[1]


@dataclass(frozen=True, slots=True)
class Columns:
    """The frame an SQL parameter is evaluated over. `problem` is the start of the error when the
    expression does not run on it, a format string with {name} and {text}."""

    schema: Mapping[str, pl.DataType]
    problem: str


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of a rule type: its kind, whether it is required, its default (a raw TOML
    value, validated like a given one) and, per kind, allowed choices, bounds or columns."""

    name: str
    kind: Kind
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    positive: bool = False
    columns: Columns | None = None
    items: Callable[[Any], Any] | None = None  # LIST: each item's typed value (ParamError)

    def validate(self, raw: Any) -> Any:
        """The typed value of a raw TOML value (None stays None); ParamError if refused."""
        if raw is None:
            return None
        if not isinstance(raw, _ACCEPTS[self.kind]) or (
            isinstance(raw, bool) and self.kind is not Kind.BOOL
        ):
            raise WrongType(self, raw)
        return _CONVERT[self.kind](self, raw)


class ParamError(ValueError):
    """A raw value a parameter refuses. The message names the parameter; `reason` is the message
    without the name, for callers that name it their own way."""

    def __init__(self, message: str, reason: str | None = None, name: str | None = None) -> None:
        super().__init__(message)
        self.reason = message if reason is None else reason
        self.name = name  # the parameter, when a rule's builder refuses values that do not fit


class WrongType(ParamError):
    """The raw value is of the wrong TOML type (a bool is never a number)."""

    def __init__(self, param: Param, value: Any) -> None:
        kind = param.kind
        hint = f" ({kind.noun})" if kind in (Kind.DURATION, Kind.SQL, Kind.REGEX) else ""
        super().__init__(f"{param.name!r} must be of type {kind.toml}{hint}, got {value!r}")
        self.param, self.value = param, value


def _int(param: Param, raw: int) -> int:
    if param.minimum is not None and raw < param.minimum:
        raise ParamError(f"{param.name} must be at least {param.minimum}, got {raw}")
    return raw


def _float(param: Param, raw: float) -> float:
    return float(raw)


def _duration(param: Param, raw: str) -> float:
    try:
        seconds = parse_duration(raw)
    except ValueError as exc:
        raise ParamError(f"{param.name}: {exc}", str(exc)) from None
    if param.positive and seconds <= 0:
        reason = f"must be positive, got {raw!r}"
        raise ParamError(f"{param.name} {reason}", reason)
    return seconds


def _sql(param: Param, raw: str) -> pl.Expr:
    try:
        expr = pl.sql_expr(raw)
    except Exception as exc:  # polars raises several types for bad SQL
        raise ParamError(
            f"{param.name} {raw!r} is not a valid SQL expression: {_first_line(exc)}"
        ) from None
    if param.columns is not None:
        try:
            _empty_frame(tuple(param.columns.schema.items())).select(expr)
        except Exception as exc:  # unknown columns, wrong types: several polars error types
            start = param.columns.problem.format(name=param.name, text=raw)
            raise ParamError(f"{start}: {_first_line(exc)}") from None
    return expr


_POLARS_LATER: ContextVar[list[str] | None] = ContextVar("polars_later", default=None)


@contextmanager
def polars_regex_checks_later() -> Iterator[list[str]]:
    """Within it, a regex parameter is checked by Python at once and added to the list yielded
    for `polars_accepts` to check in one query: one polars call per regex is most of the cost
    of loading the built-in rules. Whoever uses it redoes the work outside it when polars
    refuses one, to raise that regex's own error where it is."""
    later: list[str] = []
    token = _POLARS_LATER.set(later)
    try:
        yield later
    finally:
        _POLARS_LATER.reset(token)


def polars_accepts(regexes: Sequence[str]) -> bool:
    """Whether polars' regex dialect takes every one of these regexes."""
    try:
        pl.select([pl.lit("").str.contains(regex).alias(str(i)) for i, regex in enumerate(regexes)])
    except Exception:  # the error is the one regex's own, raised when it is checked alone
        return False
    return True


@functools.lru_cache(maxsize=8)
def _empty_frame(schema: tuple[tuple[str, pl.DataType], ...]) -> pl.DataFrame:
    """An empty frame of these columns, built once per schema: an SQL parameter is checked by
    running it on one (building it is most of that check's cost, paid per rule otherwise)."""
    return pl.DataFrame(schema=dict(schema))


def _regex(param: Param, raw: str) -> re.Pattern[str]:
    try:
        pattern = re.compile(raw)
        # Polars' regex dialect (Rust's) differs from Python's in places; rules run in both.
        later = _POLARS_LATER.get()
        if later is None:
            pl.Series([""]).str.contains(raw)
        else:
            later.append(raw)
    except Exception as exc:  # re.error, or one of polars' error types
        raise ParamError(f"{param.name} {raw!r} is not a valid regex: {exc}") from None
    return pattern


def _string(param: Param, raw: str) -> str:
    if param.choices and raw not in param.choices:
        raise ParamError(
            f"{param.name} must be one of: {', '.join(param.choices)}; got {raw!r}",
        )
    return raw


def _bool(param: Param, raw: bool) -> bool:
    return raw


def _list(param: Param, raw: list[Any]) -> tuple[Any, ...]:
    if param.items is None:
        return tuple(raw)
    typed = []
    for number, item in enumerate(raw, 1):
        try:
            typed.append(param.items(item))
        except ParamError as exc:
            raise ParamError(f"{param.name} item {number}: {exc.reason}") from None
    return tuple(typed)


def _first_line(exc: Exception) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


_ACCEPTS: dict[Kind, type | tuple[type, ...]] = {
    Kind.INT: int,
    Kind.FLOAT: (int, float),
    Kind.DURATION: str,
    Kind.SQL: str,
    Kind.REGEX: str,
    Kind.STRING: str,
    Kind.BOOL: bool,
    Kind.LIST: list,
}
_CONVERT: dict[Kind, Callable[[Param, Any], Any]] = {
    Kind.INT: _int,
    Kind.FLOAT: _float,
    Kind.DURATION: _duration,
    Kind.SQL: _sql,
    Kind.REGEX: _regex,
    Kind.STRING: _string,
    Kind.BOOL: _bool,
    Kind.LIST: _list,
}
