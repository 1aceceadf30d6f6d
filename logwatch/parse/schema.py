"""The one frame every parser produces and every rule reads, and which of its columns a parse
computes."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),
    "line": pl.Int64(),
    "ts": pl.Datetime("us"),
    "text": pl.String(),
    "rank": pl.Int64(),
    "step": pl.Int64(),
    "loss": pl.Float64(),
    "grad_norm": pl.Float64(),
    "lr": pl.Float64(),
    "q_hs": pl.Int64(),
    "q_hsb": pl.List(pl.Int64()),
    "q_hsb_nonzero": pl.UInt32(),
    "snapshot": pl.Boolean(),
    "telemetry": pl.List(pl.Struct({"key": pl.String(), "value": pl.Float64()})),
    "gpu_keys": pl.UInt32(),
    "run_start": pl.Boolean(),
    "pid": pl.Int64(),
    "nan_iterations": pl.Int64(),
    "throughput": pl.Float64(),
    "epoch": pl.Float64(),
    "metrics": pl.List(pl.Struct({"key": pl.String(), "value": pl.Float64()})),
}
"""The frame every parser produces and every rule reads. Metric columns are null where the line
has no such value. `telemetry` holds a snapshot's `key=value` pairs (`gpu/0/util`...).
`throughput` is work per second as the trainer prints it (tokens/s, samples/s or it/s; tflops is
not throughput). `metrics` holds a step line's other numeric pairs (`acc 0.242`, `ppl=10397.87`),
when parsed with `metrics=True` (exports and reports), else null."""


ALWAYS = frozenset({"source", "line", "text", "ts", "run_start"})
"""Columns every parse computes: what the engine needs to place an event (its line and time)
and to cut a batch where a run restarts. (An event's step is computed with its batch's events;
`Engine` asks for it.)"""

_DERIVED = {"q_hsb_nonzero": "q_hsb", "gpu_keys": "snapshot"}
# What each value column's extractors read besides `text`: validation lines lose loss, step and
# grad norm; darknet's batch number is not a rank; `metrics` is read on step and loss lines.
_DEPENDS = {"metrics": ("step", "loss"), **{name: (base,) for name, base in _DERIVED.items()}}


def closure(columns: Iterable[str] | None, *, metrics: bool = False) -> frozenset[str]:
    """The columns a parse computes for `columns` (None: all of `SCHEMA`): those asked, what
    they are derived from, and `ALWAYS`; `metrics` only when asked for."""
    if columns is None:
        wanted = set(SCHEMA) - {"metrics"}
    else:
        unknown = set(columns) - set(SCHEMA)
        if unknown:
            raise ValueError(f"no such parsed column: {', '.join(sorted(unknown))}")
        wanted = set(columns)
    if metrics:
        wanted.add("metrics")
    return _with_bases(wanted | ALWAYS)


def _with_bases(names: Iterable[str]) -> frozenset[str]:
    """`names` and the columns they are derived from."""
    return frozenset(names) | {base for name in names for base in _DEPENDS.get(name, ())}


_VALUE_COLUMNS = frozenset(SCHEMA) - ALWAYS - {"metrics"} - set(_DERIVED)
