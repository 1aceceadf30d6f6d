"""The `crash` rule type: the run died, with the first rank that failed and its exception.

A traceback alone does not mean the run died: a caught exception printed with its traceback
can be followed by more training. So a traceback's final exception line is held as *pending*
until something decides:
- a line that only a dead run prints: torch elastic's `failed (exitcode: N) local_rank: R`,
  the Root Cause block of its `ChildFailedError` summary (`rank : N (local_rank: ...)`,
  `exitcode : -9 (pid: ...)`), `Signals.SIGKILL`, DeepSpeed's launcher `exits with return code
  = N` (N != 0): the alert fires at that line (a `ChildFailedError` traceback that the log ends
  on is a pending exception like any other);
- training progress (a loss, grad norm or throughput) from the same rank, or from a line
  without a rank: the traceback was survived, it is dropped;
- the end of the input (`replay`: the file ends after it) or, live, `quiet_after` of wall time
  with no new line (`tail`): the alert fires at the exception line.
The rank named is the first (earliest) pending exception's `[rankN]:` prefix, else the rank the
deciding line names (elastic's local rank, or its Root Cause rank). Fires once per run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from logwatch.alerts import FIRING
from logwatch.redact import redact
from logwatch.rules.log import Needs, Rule, RuleType, Transition, replace_state
from logwatch.rules.params import Kind, Param

CRASH_HINT = (
    r"Traceback \(most recent call last\)|ChildFailedError|exitcode|SIGKILL|exits with return code"
)
_PREFIX = r"^\s*(?:\[(?:rank|default)\d+\]:\s?|\[\d+,mpirank:\d+[^\]]*\]<std(?:out|err)>:\s?|\d+: )"
_HEADER = "Traceback (most recent call last)"
_GLUED_HEADER = r"\[rank(\d+)\]:\s?Traceback \(most recent"
# The last line of a Python traceback: `RuntimeError: ...`, `torch.OutOfMemoryError: ...`,
# `KeyboardInterrupt`. A progress line (`steps: 80 loss: 1.2`) is not one.
_EXCEPTION = r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::|$)"
# (pattern, capture of the rank or None, capture of the exit code or None)
_DECIDING: tuple[tuple[str, int | None, int | None], ...] = (
    (r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)", 2, 1),  # torch elastic agent
    (r"^\s*rank\s*: (\d+) \(local_rank", 1, None),  # elastic Root Cause block
    (r"^\s*exitcode\s*: (-?\d+) \(pid", None, 1),
    (r"Signals\.SIGKILL|Signal 9 \(SIGKILL\) received", None, None),
    # DeepSpeed's launcher names the rank in the command it ran
    (r"--local_rank=(\d+).*exits with return code = (-?[1-9]\d*)", 1, 2),
    (r"exits with return code = (-?[1-9]\d*)", None, 1),
)
_EXCEPTION_CHARS = 200
_READ = ("line", "ts", "step", "text", "rank", "loss", "grad_norm", "throughput")


@dataclass(frozen=True, slots=True)
class CrashRule:
    """Fires once per run when the run died; see the module doc for what decides it."""

    quiet_after_s: float

    @property
    def needs(self) -> Needs:
        """What a pending exception records and progress reads; a quiet rule moves only on a
        traceback header or a deciding line."""
        return Needs(frozenset(_READ), CRASH_HINT)

    def quiet(self, state: dict[str, Any]) -> bool:
        """Fired already, or no traceback open and no exception pending."""
        return bool(state["fired"]) or (not any(state["open"].values()) and not state["pending"])

    def initial_state(self) -> dict[str, Any]:
        return {"open": {}, "pending": [], "fired": False, "last_s": None}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        if state["fired"]:
            return [], state
        if self.quiet(state) and not frame.get_column("text").str.contains(CRASH_HINT).any():
            return [], state
        rows = _classified(frame, state["open"])
        pending = _pending(rows, state["pending"])
        deciding = rows.filter(pl.col("_deciding"))
        new_state = {**state, "open": _still_open(rows, state["open"])}
        if not deciding.is_empty():
            first = deciding.row(0, named=True)
            alive = [p for p in pending if p["at"] < first["_row"] and _alive(p, first["_row"])]
            fired = _fire(first["_row"], alive, first)
            return [fired], {**new_state, "pending": [], "fired": True}
        survivors = [_stored(p) for p in pending if p["cleared"] is None]
        latest: dict[str, dict[str, Any]] = {}
        for p in survivors:  # one per rank: its latest exception (a chained traceback's last)
            latest[p["rank"]] = p
        return [], {**new_state, "pending": sorted(latest.values(), key=lambda p: p["line"])}

    def finish(self, state: dict[str, Any]) -> tuple[list[Transition], dict[str, Any]]:
        """At the end of the input: a pending exception ended the log, so the run died."""
        if state["fired"] or not state["pending"]:
            return [], state
        return [_fire_pending(state["pending"])], replace_state(state, pending=[], fired=True)

    def tick(
        self, state: dict[str, Any], now_s: float, arrived: bool
    ) -> tuple[list[Transition], dict[str, Any]]:
        """Live: a pending exception followed by `quiet_after_s` of silence ended the log."""
        if arrived or state["last_s"] is None:
            return [], replace_state(state, last_s=now_s)
        if state["fired"] or not state["pending"] or now_s - state["last_s"] < self.quiet_after_s:
            return [], state
        return [_fire_pending(state["pending"])], replace_state(state, pending=[], fired=True)


def _classified(frame: pl.DataFrame, open_before: Mapping[str, bool]) -> pl.DataFrame:
    """Every row with its rank key, whether it is progress, a deciding line, or the final
    exception line of a traceback (the first unindented line after `Traceback ...`)."""
    msg = (
        pl.col("text")
        .str.replace(_PREFIX, "")
        .str.replace(r"^.*\[rank\d+\]:\s?(Traceback \(most)", "$1")
    )
    marker = pl.when(pl.col("_header")).then(True).when(pl.col("_body")).then(None).otherwise(False)
    known = pl.col("_rk").replace_strict(dict(open_before), default=False, return_dtype=pl.Boolean)
    progress = pl.any_horizontal(
        pl.col(name).is_not_null() for name in ("loss", "grad_norm", "throughput")
    )
    return (
        frame.select(*_READ)
        .with_row_index("_row")
        .with_columns(
            # `...4.12s/it][rank1]: Traceback`: a header glued onto a progress bar has its rank.
            pl.coalesce(
                pl.col("text").str.extract(_GLUED_HEADER, 1), pl.col("rank").cast(pl.String)
            )
            .fill_null("-1")
            .alias("_rk"),
            msg.alias("_msg"),
            progress.alias("_progress"),
        )
        .with_columns(
            pl.col("_msg").str.contains(_HEADER, literal=True).alias("_header"),
            pl.col("_msg").str.contains(r"^(?:\s|$)").alias("_body"),
            pl.any_horizontal(pl.col("text").str.contains(p) for p, _, _ in _DECIDING).alias(
                "_deciding"
            ),
        )
        .with_columns(marker.alias("_marker"))
        .with_columns(
            pl.col("_marker").shift(1).forward_fill().over("_rk").fill_null(known).alias("_open")
        )
        .with_columns(
            (
                ~pl.col("_header")
                & ~pl.col("_body")
                & pl.col("_open")
                & pl.col("_msg").str.contains(_EXCEPTION)
            ).alias("_exception"),
            _next(pl.col("_progress")).over("_rk").alias("_next_same"),
            _next(pl.col("_progress") & pl.col("rank").is_null()).alias("_next_unranked"),
            _next(pl.col("_progress")).alias("_next_any"),
        )
    )


def _next(condition: pl.Expr) -> pl.Expr:
    """The index of the first later row meeting `condition` (null when none in the batch)."""
    return pl.when(condition).then(pl.col("_row")).shift(-1).backward_fill()


def _still_open(rows: pl.DataFrame, before: Mapping[str, bool]) -> dict[str, bool]:
    """Per rank: is a traceback still open (a header seen, no unindented line since)?"""
    last = (
        rows.filter(pl.col("_marker").is_not_null()).group_by("_rk").agg(pl.col("_marker").last())
    )
    opened = {
        **before,
        **dict(zip(last.get_column("_rk"), last.get_column("_marker"), strict=True)),
    }
    return {rank: True for rank, is_open in opened.items() if is_open}


def _pending(rows: pl.DataFrame, carried: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Carried and new pending exceptions, each with `at` (its row; -1 when carried) and
    `cleared` (the row of the progress that dropped it, or None)."""
    out: list[dict[str, Any]] = []
    first = rows.filter(pl.col("_progress")).group_by("_rk").agg(pl.col("_row").min())
    first_by_rank = dict(zip(first.get_column("_rk"), first.get_column("_row"), strict=True))
    any_first = min(first_by_rank.values(), default=None)
    for p in carried:
        if p["rank"] == "-1":
            cleared = any_first
        else:
            cleared = _earliest(first_by_rank.get(p["rank"]), first_by_rank.get("-1"))
        out.append({**p, "at": -1, "cleared": cleared})
    for r in rows.filter(pl.col("_exception")).iter_rows(named=True):
        if r["_rk"] == "-1":
            cleared = r["_next_any"]
        else:
            cleared = _earliest(r["_next_same"], r["_next_unranked"])
        ts = r["ts"].isoformat() if r["ts"] is not None else None
        out.append(
            {
                "rank": r["_rk"],
                "line": r["line"],
                "ts": ts,
                "step": r["step"],
                "text": r["text"],
                "exception": _exception_text(r["_msg"]),
                "at": r["_row"],
                "cleared": cleared,
            }
        )
    return out


def _earliest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _alive(p: Mapping[str, Any], row: int) -> bool:
    return p["cleared"] is None or p["cleared"] > row


def _stored(p: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in p.items() if k not in ("at", "cleared")}


def _exception_text(message: str) -> str:
    text = redact(message.strip())
    return text if len(text) <= _EXCEPTION_CHARS else text[: _EXCEPTION_CHARS - 1] + "…"


def _labels(first: Mapping[str, Any] | None, rank: str | None, fallback: str) -> dict[str, str]:
    if first is not None and first["rank"] != "-1":
        rank = first["rank"]
    return {
        "rank": rank if rank is not None else "?",
        "exception": first["exception"] if first is not None else fallback,
    }


def _fire(row: int, alive: list[dict[str, Any]], deciding: Mapping[str, Any]) -> Transition:
    """The alert at a deciding line, naming the earliest pending exception if there is one."""
    text = str(deciding["text"])
    rank: str | None = None
    code: float | None = None
    for pattern, rank_group, code_group in _DECIDING:
        found = pl.Series([text]).str.extract_groups(pattern)[0]
        if found is None or all(v is None for v in found.values()):
            continue
        if rank_group is not None and rank is None:
            rank = found[str(rank_group)]
        if code_group is not None and code is None:
            code = float(found[str(code_group)])
    first = min(alive, key=lambda p: p["line"]) if alive else None
    fallback = (
        f"exit code {int(code)} (no traceback of it in this log)"
        if code is not None
        else _exception_text(str(deciding["_msg"]))
    )
    labels = _labels(first, rank, fallback)
    return Transition(row=row, status=FIRING, value=code, labels=labels)


def _fire_pending(pending: list[dict[str, Any]]) -> Transition:
    """The alert at the earliest pending exception's own line (decided after its batch)."""
    first = min(pending, key=lambda p: p["line"])
    ts = datetime.fromisoformat(first["ts"]) if first["ts"] else None
    fields = {"line": first["line"], "ts": ts, "step": first["step"], "text": first["text"]}
    return Transition(
        row=0, status=FIRING, value=None, labels=_labels(first, None, ""), fields=fields
    )


def _build_crash(params: Mapping[str, Any]) -> Rule:
    return CrashRule(quiet_after_s=params["quiet_after"])


CRASH_RULE_TYPES: dict[str, RuleType] = {
    "crash": RuleType(
        (Param("quiet_after", Kind.DURATION, default="2m", positive=True),), _build_crash
    ),
}
"""The crash rule type (`logwatch.rules.registry` assembles every rule type)."""
