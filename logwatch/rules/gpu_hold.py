"""The held condition of `logwatch.rules.gpu.HoldRule`, vectorized: given a batch's scored rows
(`_key`, `ts`, `_cond`, `_value`, `_row`, in file order) and the state the earlier batches
left per key, where the condition started to hold for the rule's duration (fire) and where it
stopped after firing (resolve). Any split of the rows gives the same transitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import polars as pl

from logwatch.alerts import FIRING, RESOLVED
from logwatch.rules.base import Transition

ROW = "_row"
"""The column of a GPU frame's rows that transitions point at (`Transition.row`)."""


def hold_transitions(
    rows: pl.DataFrame, hold_s: float, state: Mapping[str, Any]
) -> tuple[list[Transition], dict[str, Any]]:
    """Fire/resolve points of "condition held for hold_s" per `_key`, vectorized.

    State per key: `since` (ISO time the current true run started, or None) and `fired`.
    """
    carried: dict[str, dict[str, Any]] = dict(state.get("keys", {}))
    if not rows.get_column("_cond").any():
        quiet = quiet_keys(rows.get_column("_key").unique().to_list(), state)
        if quiet is not None:
            return [], quiet
    prior = pl.DataFrame(
        {
            "_key": list(carried),
            "_s_since": [_parse_ts(v.get("since")) for v in carried.values()],
            "_s_fired": [bool(v.get("fired")) for v in carried.values()],
        },
        schema={"_key": pl.String, "_s_since": pl.Datetime("us"), "_s_fired": pl.Boolean},
    )
    frame = (
        rows.with_row_index("_seq")
        .sort(["_key", "_seq"])  # file order: the same for any cut of the file
        .join(prior, on="_key", how="left")
        .with_columns(pl.col("_s_fired").fill_null(False))
    )
    cond, key = pl.col("_cond"), "_key"
    carried_true = pl.col("_s_since").is_not_null()
    prev = cond.shift(1).over(key)
    prev_cond = pl.when(prev.is_null()).then(carried_true).otherwise(prev)
    frame = frame.with_columns(
        (cond != prev_cond).cast(pl.UInt32).cum_sum().over(key).alias("_run")
    )
    run_keys = [key, "_run"]
    continues = (pl.col("_run") == 0) & carried_true
    start = (
        pl.when(continues).then(pl.col("_s_since")).otherwise(pl.col("ts").first().over(run_keys))
    )
    held = cond & ((pl.col("ts") - start).dt.total_microseconds() >= int(hold_s * 1_000_000))
    carried_fired = (pl.col("_run") == 0) & pl.col("_s_fired") & carried_true
    frame = frame.with_columns(
        start.alias("_start"), held.alias("_held"), carried_fired.alias("_cf")
    )
    fired_run = pl.col("_held").any().over(run_keys) | pl.col("_cf")
    first_held = pl.col("_held") & (pl.col("_held").cast(pl.UInt32).cum_sum().over(run_keys) == 1)
    frame = frame.with_columns(
        fired_run.alias("_fired_run"), (first_held & ~pl.col("_cf")).alias("_fire")
    )
    prev_fired = pl.col("_fired_run").shift(1).over(key)
    run_changed = (pl.col("_run") != pl.col("_run").shift(1).over(key)).fill_null(True)
    carried_fire = pl.col("_s_fired") & carried_true
    resolve = (
        ~cond & run_changed & pl.when(prev_fired.is_null()).then(carried_fire).otherwise(prev_fired)
    )
    frame = frame.with_columns(resolve.alias("_resolve"))
    events = frame.filter(pl.col("_fire") | pl.col("_resolve")).sort("_seq")
    transitions = [
        Transition(
            row=int(row),
            status=FIRING if fire else RESOLVED,
            value=value,
            labels={} if k == "run" else {"gpu": k},
        )
        for row, fire, value, k in events.select(ROW, "_fire", "_value", key).iter_rows()
    ]
    last = frame.group_by(key).agg(pl.all().last())
    for k, is_true, since, was_fired in last.select(
        key, "_cond", "_start", "_fired_run"
    ).iter_rows():
        carried[k] = {
            "since": since.isoformat() if is_true else None,
            "fired": bool(is_true and was_fired),
        }
    return transitions, {"keys": carried}


def quiet_keys(keys: list[str], state: Mapping[str, Any]) -> dict[str, Any] | None:
    """The state after a batch where nothing holds on `keys`, or None when one of them was
    held before it (it may resolve: the full computation runs)."""
    carried: dict[str, dict[str, Any]] = dict(state.get("keys", {}))
    if any(carried.get(k, {}).get("since") is not None for k in keys):
        return None
    carried.update({k: {"since": None, "fired": False} for k in keys})
    return {"keys": carried}


def _parse_ts(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)
