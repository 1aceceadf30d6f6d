"""What the engine carries for each source between batches: rule states, the last step, the
alerts firing (`lifecycle`), stats and the run id; its export to JSON and the checks on import."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import polars as pl

from logwatch.engine.lifecycle import Lifecycle
from logwatch.engine.summary import _summary
from logwatch.redact import MASK, redact
from logwatch.rules.base import Transition
from logwatch.statecheck import (
    INT,
    LIST,
    NUMBER,
    OBJECT,
    TIME,
    optional,
)

ErrorHandler = Callable[[str, str, Exception], None]
"""Called as (rule id, source, exception) when a rule raises; the engine goes on without it."""

_T = TypeVar("_T")

Step = Callable[[dict[str, Any]], tuple[list[Transition], dict[str, Any]]]
"""One rule step on its state: (transitions, new state)."""


@dataclass(frozen=True, slots=True)
class DataWarning:
    """Something in a source's lines the rules could not read as written, and what was made of
    it (a snapshot value no GPU column holds: read as missing). Said once per source and kind."""

    source: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.message}"


WarningHandler = Callable[[DataWarning], None]
"""Called with each data warning, in line order, once per source and kind."""


@dataclass(slots=True)
class SourceStats:
    """What a post-mortem summary says about one source."""

    lines: int = 0
    steps_seen: int = 0
    first_step: int | None = None
    last_step: int | None = None
    last_loss: float | None = None
    q_hs_min: int | None = None
    q_hs_max: int | None = None
    runs: int = 0
    fired: Counter[str] = field(default_factory=Counter)
    first_ts: str | None = None  # ISO 8601, as the checkpoint stores it
    last_ts: str | None = None
    throughput_median: float | None = None  # set by replay (the median of every step's value)

    def count(self, frame: pl.DataFrame) -> None:
        """Fold only the line and run counts of a batch (the engine's own bookkeeping)."""
        self.lines += frame.height
        self.runs += int(frame.get_column("run_start").sum())

    def update(self, frame: pl.DataFrame) -> None:
        """Fold one parsed batch into the stats (vectorized aggregates)."""
        self.fold(frame.select(STATS_AGG).row(0, named=True))

    def fold(self, agg: dict[str, Any]) -> None:
        """Fold one batch's `STATS_AGG` row (computed for many sources at once, per source)."""
        self.lines += agg["n"]
        self.steps_seen += agg["steps"]
        if self.first_step is None:
            self.first_step = agg["first_step"]
        if agg["last_step"] is not None:
            self.last_step = agg["last_step"]
        if agg["last_loss"] is not None:
            self.last_loss = agg["last_loss"]
        self.q_hs_min = _fold(min, self.q_hs_min, agg["q_min"])
        self.q_hs_max = _fold(max, self.q_hs_max, agg["q_max"])
        self.runs += agg["runs"]
        if self.first_ts is None and agg["first_ts"] is not None:
            self.first_ts = agg["first_ts"].isoformat()
        if agg["last_ts"] is not None:
            self.last_ts = agg["last_ts"].isoformat()


STATS_AGG = (
    pl.len().alias("n"),
    pl.col("step").count().alias("steps"),
    pl.col("step").drop_nulls().first().alias("first_step"),
    pl.col("step").drop_nulls().last().alias("last_step"),
    pl.col("loss").drop_nulls().last().alias("last_loss"),
    pl.col("q_hs").min().alias("q_min"),
    pl.col("q_hs").max().alias("q_max"),
    pl.col("run_start").sum().alias("runs"),
    pl.col("ts").drop_nulls().first().alias("first_ts"),
    pl.col("ts").drop_nulls().last().alias("last_ts"),
)
"""`SourceStats.update`'s aggregates, built once (building them costs more than a small batch)."""


def _fold(fn: Callable[[int, int], int], old: int | None, new: int | None) -> int | None:
    if old is None:
        return new
    return old if new is None else fn(old, new)


@dataclass(slots=True)
class SourceState:
    """Everything the engine carries for one source between batches."""

    rule_states: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_step: int | None = None
    alerts: Lifecycle = field(default_factory=lambda: Lifecycle(_summary))
    stats: SourceStats = field(default_factory=SourceStats)
    run_id: str | None = None  # what the current run's `run start:` line calls it
    # each rule state's redacted copy as the last export made it, kept with the state object
    # it was made of (`masked_rule_states`)
    masked_rules: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(
        default_factory=dict, compare=False, repr=False
    )


_RUN_ID = re.compile(r"\brun[_ -]?(?:id|name)\s*[=:]\s*['\"]?([\w.:/@+-]{1,80})")


def run_id(text: str) -> str | None:
    """The run id a `run start:` line announces (`run_id=slammed4`, `run_name: exp-3`), or None;
    redacted like all log text (`[REDACTED]` for a token-shaped one)."""
    found = _RUN_ID.search(text)
    if found is None:
        return None
    value = redact(found[1])
    # A secret can reach past the id's characters (a registered one with a `=` or a space):
    # an id that the whole line's redaction does not keep as it is goes whole.
    return value if value in redact(text) else MASK


STATS_COLUMNS = frozenset({"step", "loss", "q_hs", "run_start", "ts"})
"""What `SourceStats.update` reads."""


_STATS_FIELDS = {
    "lines": INT,
    "steps_seen": INT,
    "first_step": optional(INT),
    "last_step": optional(INT),
    "last_loss": optional(NUMBER),
    "q_hs_min": optional(INT),
    "q_hs_max": optional(INT),
    "runs": INT,
    "fired": OBJECT,
    "first_ts": optional(TIME),
    "last_ts": optional(TIME),
    "throughput_median": optional(NUMBER),
}
"""A checkpoint's `SourceStats`: what `import_state` accepts (`export_state` writes them all)."""
_STATE_FIELDS = {"rule_states": OBJECT, "last_step": optional(INT), "active": LIST, "stats": OBJECT}


def masked(value: _T) -> _T:
    """`value` with every string in it (through dicts and lists) redacted as the sinks redact
    log text: what the engine keeps of a log's text (run ids, labels, rule states) goes to the
    alerts and the state directory only through here (or, for a line's text, `redact`)."""
    if isinstance(value, str):
        return cast(_T, redact(value))
    if isinstance(value, dict):
        # a number, a flag or a null (most of a state's leaves) is itself: no call for it
        return cast(
            _T, {key: item if type(item) in _PLAIN else masked(item) for key, item in value.items()}
        )
    if isinstance(value, list):
        return cast(_T, [item if type(item) in _PLAIN else masked(item) for item in value])
    return value


_PLAIN = frozenset({int, float, bool, type(None)})
"""The exact types `masked` returns as they are (no string inside)."""


def masked_rule_states(state: SourceState) -> dict[str, dict[str, Any]]:
    """`masked(state.rule_states)`, each rule's redacted copy made again only when its state is
    another object than at the last export. Exact because a rule step never changes a state in
    place: it returns the same object when nothing changed, a new one otherwise (checked for
    every built-in rule in `tests/test_engine_export.py`). A live checkpoint exports every
    busy source each second; most of its rules' states did not move since the last one."""
    kept = state.masked_rules
    out: dict[str, dict[str, Any]] = {}
    for rule_id, rule_state in state.rule_states.items():
        entry = kept.get(rule_id)
        if entry is None or entry[0] is not rule_state:
            entry = kept[rule_id] = (rule_state, masked(rule_state))
        out[rule_id] = entry[1]
    if len(kept) > len(out):  # a state gone (a restart): its copy goes too
        for rule_id in [r for r in kept if r not in out]:
            del kept[rule_id]
    return out


def _unreported(rule_id: str, source: str, exc: Exception) -> None:
    """A rule error while rehearsing: not reported (the same lines are not a user's)."""
