"""GPU rule types: a condition held for a duration per GPU (or over the run's GPUs), and a
counter that rises. Vectorized over GPU frames, with state carried between batches so that any
split of the samples gives the same transitions (as `logwatch.rules.log.StreakRule`).

Each rule is a `GpuRule`: it reads GPU frames (`logwatch.gpu.frames.GPU_SCHEMA` plus `run_uses`
and `log_stalled`) through `evaluate_gpu`. On a log, the engine reads the batch's own
`gpu/<i>/...` snapshot keys once, narrow (`log_gpu_rows`), and a `HoldRule` takes from them only
the rows and columns of the metrics it reads (`evaluate_log`; other GPU rules get the whole
`log_gpu_frame`), so `replay` gets the same rules on a finished log; `evaluate` (the Rule
protocol) does the same for one rule alone. The held condition's fire and resolve points over
a batch's scored rows are `logwatch.rules.gpu_hold`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import polars as pl

from logwatch.alerts import FIRING
from logwatch.gpu.frames import GPU_SCHEMA, LOG_METRIC_OF, narrow_metrics, narrow_to_gpu_frame
from logwatch.gpu.log_rows import DroppedPair, cut_rows, read_telemetry_rows
from logwatch.rules.base import Needs, RuleType, Transition
from logwatch.rules.gpu_hold import ROW, hold_transitions, quiet_keys
from logwatch.rules.gpu_many import piece_keys, scored_metrics
from logwatch.rules.params import Columns, Kind, Param

LOG_GPU_COLUMNS = frozenset({"text", "snapshot", "gpu_keys", "ts", "line"})
"""What the GPU rows of a log batch are read from (`telemetry_rows`, the engine's check for
batches without `gpu/` keys)."""

CONTEXT_SCHEMA: dict[str, pl.DataType] = {"run_uses": pl.Boolean(), "log_stalled": pl.Boolean()}
"""Columns the GPU driver adds to NVML frames; log snapshots get run_uses=true, log_stalled=false
(a snapshot line is itself proof that the log advances)."""

_ROW = ROW


@runtime_checkable
class GpuRule(Protocol):
    """What the GPU monitor (and the engine, on a log's own GPU snapshots) needs from a GPU rule.

    Checked with isinstance once per rule set, never per batch: runtime Protocol checks are slow.
    """

    @property
    def nvml_only(self) -> bool:
        """Whether the rule can only fire on live NVML samples (log frames are skipped)."""
        ...

    def initial_state(self) -> dict[str, Any]:
        """State before the first sample (JSON-serializable)."""
        ...

    def evaluate_gpu(
        self, gpu_frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        """Transitions found in a GPU frame (rows from its `_row` column) and the state after."""
        ...


def with_log_context(gpu_frame: pl.DataFrame) -> pl.DataFrame:
    """Context columns for GPU rows read from the log itself."""
    return gpu_frame.with_columns(
        pl.lit(True).alias("run_uses"), pl.lit(False).alias("log_stalled")
    )


@dataclass(frozen=True, slots=True)
class HoldRule:
    """Fires when `condition` holds on a GPU for `hold_s` seconds of sample time; resolves at the
    first sample where it does not. Scope "run": the condition must hold on every GPU the run
    uses at the same sample time (one alert, no gpu label)."""

    condition: pl.Expr
    hold_s: float
    value: pl.Expr | None = None
    scope: str = "gpu"
    run_gpus_only: bool = False
    nvml_only: bool = False
    log_metrics: frozenset[str] | None = field(init=False, repr=False, compare=False)
    """The snapshot metrics whose rows the rule needs on a log (None: every GPU row)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "log_metrics", _log_metrics(self.condition, self.value))

    @property
    def needs(self) -> Needs:
        """On a log: the snapshot lines' text (the GPU rows are read from it) and their time;
        nothing when the rule reads NVML samples only."""
        return Needs(frozenset() if self.nvml_only else LOG_GPU_COLUMNS)

    def initial_state(self) -> dict[str, Any]:
        return {"keys": {}}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        """On a log frame: the rule over the log's own GPU snapshot keys."""
        if self.nvml_only:
            return [], state
        return self.evaluate_log(log_gpu_rows(frame), state)

    def evaluate_log(
        self, rows: LogGpuRows, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        """On a log batch's GPU rows: only the rows and columns of the metrics the rule reads
        (scored once per batch: `LogGpuRows.scored`, maybe ahead on a parse thread)."""
        return self._evaluated(rows.scored(self), state, rows.keys_of(self))

    def evaluate_gpu(
        self, gpu_frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        """On a GPU frame; transition rows are the frame's `_row` column, or its row index."""
        return self._evaluated(self.score(gpu_frame), state)

    def score(self, gpu_frame: pl.DataFrame) -> pl.DataFrame:
        """The frame's rows as `_scored` gives them: what the rule's step reads of a GPU frame,
        with no state (so it can be computed ahead)."""
        frame = gpu_frame if _ROW in gpu_frame.columns else gpu_frame.with_row_index(_ROW)
        return self._scored(frame)

    def _evaluated(
        self, scored: pl.DataFrame, state: dict[str, Any], keys: list[str] | None = None
    ) -> tuple[list[Transition], dict[str, Any]]:
        """The transitions of a scored frame (`score`; `keys`: its GPUs, if known) and after."""
        if scored.is_empty():
            return [], state
        # (module constants: building these was most of a quiet step, once per file)
        key = _RUN_KEY if self.scope == "run" else _GPU_KEY
        if not scored.get_column("_cond").any():  # the keys only, not a key per row
            if keys is None and self.scope == "run":
                keys = ["run"]  # every row's
            elif keys is None:  # (`LogGpuRows.pieces` gives a group's files' in one query)
                keys = scored.select(key.unique(maintain_order=True)).to_series().to_list()
            quiet = quiet_keys(keys, state)
            if quiet is not None:
                return [], quiet
        return hold_transitions(scored.with_columns(key.alias("_key")), self.hold_s, state)

    def _scored(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Rows as (ts, gpu, _row, _cond, _value) with the condition known (scope "run": one
        row per time, gpu null)."""
        if self.run_gpus_only or self.scope == "run":
            frame = frame.filter(pl.col("run_uses").fill_null(True))
        value = self.value if self.value is not None else pl.lit(None, pl.Float64)
        rows = frame.select(
            pl.col("ts"),
            pl.col("gpu"),
            pl.col(_ROW),
            self.condition.alias("_cond"),
            value.cast(pl.Float64).alias("_value"),
        ).filter(pl.col("ts").is_not_null() & pl.col("_cond").is_not_null())
        if self.scope == "run":
            return (
                rows.group_by("ts", maintain_order=True)
                .agg(
                    pl.col("_cond").all(),
                    pl.col("_value").max(),
                    pl.col(_ROW).last(),
                )
                .with_columns(pl.lit(None, pl.Int64).alias("gpu"))
            )
        return rows


_RUN_KEY = pl.lit("run")
_GPU_KEY = pl.col("gpu").cast(pl.String)
"""A held row's key: the run's one (scope "run"), else its GPU's."""

_LOG_CONSTANTS = {"origin": "log", "lost": False, "run_uses": True, "log_stalled": False}
"""GPU columns that are the same on every row read from a log (the others there are null)."""
_VARYING = frozenset({"ts", "gpu", _ROW})


def _log_metrics(condition: pl.Expr, value: pl.Expr | None) -> frozenset[str] | None:
    """The snapshot metrics a held condition (row-wise SQL) needs on a log, or None for all.

    A GPU row without any of the metrics it reads has every input null or constant; when the
    condition is null there, the row is dropped anyway (`_scored`), so only the rows carrying
    one of those metrics matter.
    """
    roots = set(condition.meta.root_names())
    if value is not None:
        roots |= set(value.meta.root_names())
    if roots & _VARYING or not roots <= set(GPU_COLUMNS):
        return None
    probe = pl.DataFrame(
        [{name: _LOG_CONSTANTS.get(name) for name in GPU_COLUMNS}], schema=GPU_COLUMNS
    )
    if probe.select(condition.alias("_c")).item() is not None:
        return None
    return frozenset(LOG_METRIC_OF[name] for name in roots if name in LOG_METRIC_OF)


class LogGpuRows:
    """The GPU rows of one log batch, narrow (`telemetry_rows`, maybe of some `metrics` only),
    and the GPU frames of the metric sets its rules read, each built once. `dropped`: the
    first snapshot pair of each kind the rows left out (`read_telemetry_rows`)."""

    __slots__ = ("_frames", "_present", "_row_scored", "_scored", "dropped", "metrics", "narrow")

    def __init__(
        self,
        narrow: pl.DataFrame,
        metrics: frozenset[str] | None = None,
        dropped: tuple[DroppedPair, ...] = (),
    ) -> None:
        self.narrow = narrow
        self.metrics = metrics
        self.dropped = dropped
        self._frames: dict[frozenset[str] | None, pl.DataFrame] = {}
        self._present: list[str] | None = None
        self._scored: dict[int, pl.DataFrame] = {}
        # the rules of `_scored` whose rows are row by row: their GPUs, if cut from a group's
        self._row_scored: dict[int, list[str] | None] = {}

    def pieces(self, bounds: Sequence[tuple[int, int]], *, keys: bool = True) -> list[LogGpuRows]:
        """The log rows of each piece [begin, end) (ascending, not overlapping), counted from
        its begin, with the GPU frames
        built so far and the scores of the rules of scope "gpu" cut to it as well (rows read,
        framed and scored once for a group of files, `Engine.prepare_many`): all row by row;
        `keys`: with each piece's GPUs of each cut score (`keys_of`), found in one query."""
        out = [
            LogGpuRows(narrow, self.metrics) for narrow in cut_rows(self.narrow, "_log_row", bounds)
        ]
        for metrics, frame in self._frames.items():
            for piece, cut in zip(out, cut_rows(frame, _ROW, bounds), strict=True):
                piece._frames[metrics] = cut
        for key, scored in self._scored.items():
            if key in self._row_scored:
                gpus_of = piece_keys(scored, _ROW, bounds) if keys else [None] * len(bounds)
                cuts = cut_rows(scored, _ROW, bounds)
                for piece, cut, gpus in zip(out, cuts, gpus_of, strict=True):
                    piece._scored[key], piece._row_scored[key] = cut, gpus
        return out

    def keys_of(self, rule: HoldRule) -> list[str] | None:
        """The GPUs of `rule`'s scored rows, where `pieces` cut them from a group's (else None)."""
        return self._row_scored.get(id(rule))

    def scored(self, rule: HoldRule) -> pl.DataFrame:
        """`rule.score` of a frame of the metrics it reads (`scored_metrics`), computed once per
        rule: the engine may compute it ahead, on a parse thread (`Engine.prepare`)."""
        found = self._scored.get(id(rule))
        if found is None:
            metrics = scored_metrics(rule.log_metrics, self.metrics)
            found = self._scored[id(rule)] = rule.score(self.frame(metrics))
            if rule.scope != "run":  # "run" folds each time's rows into one
                self._row_scored[id(rule)] = None
        return found

    def frame(self, metrics: frozenset[str] | None = None) -> pl.DataFrame:
        """A GPU frame (with log context and `_row`) of the rows that carry one of `metrics`
        (snapshot keys; None: all rows and metrics)."""
        if self.metrics is not None and (metrics is None or not metrics <= self.metrics):
            raise ValueError(
                f"GPU rows of metrics {sorted(metrics or ['all'])} asked from rows read for"
                f" {sorted(self.metrics)} only: read them with log_gpu_metrics(rules)"
            )
        found = self._frames.get(metrics)
        if found is None:
            if self._present is None:
                self._present = narrow_metrics(self.narrow)
            gpu = narrow_to_gpu_frame(
                self.narrow, row_column=_ROW, metrics=metrics, present=self._present
            )
            found = self._frames[metrics] = with_log_context(gpu)
        return found


def log_gpu_rows(frame: pl.DataFrame, metrics: frozenset[str] | None = None) -> LogGpuRows:
    """A log batch's `gpu/<i>/...` snapshot keys, read once for all its GPU rules (the engine
    builds it once per batch); with `metrics` (`log_gpu_metrics`), only those metrics."""
    read = read_telemetry_rows(frame, metrics)
    return LogGpuRows(read.rows, metrics, read.dropped)


def log_gpu_metrics(rules: Iterable[object]) -> frozenset[str] | None:
    """The snapshot metrics the GPU rules among `rules` read on a log (None: every metric,
    when one of them reads whole GPU frames)."""
    found: set[str] = set()
    for rule in rules:
        if not isinstance(rule, GpuRule) or rule.nvml_only:
            continue
        if not isinstance(rule, HoldRule) or rule.log_metrics is None:
            return None
        found |= rule.log_metrics
    return frozenset(found)


def log_gpu_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """The GPU frame of a log batch (its `gpu/<i>/...` snapshot keys, with log context)."""
    return log_gpu_rows(frame).frame()


@dataclass(frozen=True, slots=True)
class RiseRule:
    """Fires once per GPU when a counter (e.g. uncorrected ECC errors) goes up; never resolves
    within the run: the errors happened."""

    column: str
    nvml_only: bool = True

    @property
    def needs(self) -> Needs:
        """On a log: the snapshot lines (no log carries such a counter today)."""
        return Needs(frozenset() if self.nvml_only else LOG_GPU_COLUMNS)

    def initial_state(self) -> dict[str, Any]:
        return {"last": {}, "fired": []}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        """On a log frame: the log carries no such counter, so nothing to do."""
        return [], state

    def evaluate_gpu(
        self, gpu_frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        frame = gpu_frame if _ROW in gpu_frame.columns else gpu_frame.with_row_index(_ROW)
        rows = frame.select("gpu", "ts", _ROW, pl.col(self.column).alias("_v")).filter(
            pl.col("_v").is_not_null()
        )
        if rows.is_empty():
            return [], state
        last: dict[str, int] = dict(state["last"])
        fired: list[str] = list(state["fired"])
        if set(rows.get_column("gpu").cast(pl.String).unique()) <= set(fired):
            # Every GPU here has fired (it never resolves): only the last counts move.
            newest = rows.with_row_index("_seq").group_by("gpu")
            lasts = newest.agg(pl.col("_v").sort_by("ts", "_seq").last())
            last.update({str(gpu): int(value) for gpu, value in lasts.iter_rows()})
            return [], {"last": last, "fired": fired}
        prior = pl.DataFrame(
            {"gpu": [int(k) for k in last], "_prior": list(last.values())},
            schema={"gpu": pl.Int64, "_prior": pl.Int64},
        )
        scored = (
            rows.with_row_index("_seq")
            .sort(["gpu", "ts", "_seq"])
            .join(prior, on="gpu", how="left")
            .with_columns(
                pl.col("_v").shift(1).over("gpu").fill_null(pl.col("_prior")).alias("_before")
            )
        )
        rises = scored.filter(pl.col("_v") > pl.col("_before")).sort("_seq")
        out = []
        for gpu, row, value in rises.select("gpu", _ROW, "_v").iter_rows():
            if str(gpu) not in fired:
                fired.append(str(gpu))
                out.append(Transition(int(row), FIRING, float(value), {"gpu": str(gpu)}))
        for gpu, value in scored.group_by("gpu").agg(pl.col("_v").last()).iter_rows():
            last[str(gpu)] = int(value)
        return out, {"last": last, "fired": fired}


GPU_COLUMNS: dict[str, pl.DataType] = {**GPU_SCHEMA, **CONTEXT_SCHEMA}
GPU_FRAME = Columns(
    GPU_COLUMNS,
    "{name} {text!r} is not a valid SQL expression over GPU columns ("
    + ", ".join(GPU_COLUMNS)
    + ")",
)
"""What GPU rule expressions run over."""


def _build_hold(params: Mapping[str, Any]) -> HoldRule:
    return HoldRule(
        condition=params["condition"],
        hold_s=params["hold"],
        value=params["value"],
        scope=params["scope"],
        run_gpus_only=params["run_gpus_only"],
        nvml_only=params["nvml_only"],
    )


def _build_rise(params: Mapping[str, Any]) -> RiseRule:
    return RiseRule(column=params["column"])


GPU_RULE_TYPES: dict[str, RuleType] = {
    "gpu-hold": RuleType(
        (
            Param("condition", Kind.SQL, required=True, columns=GPU_FRAME),
            Param("hold", Kind.DURATION, required=True),
            Param("value", Kind.SQL, columns=GPU_FRAME),
            Param("scope", Kind.STRING, default="gpu", choices=("gpu", "run")),
            Param("run_gpus_only", Kind.BOOL, default=False),
            Param("nvml_only", Kind.BOOL, default=False),
        ),
        _build_hold,
    ),
    "gpu-rise": RuleType(
        (Param("column", Kind.STRING, required=True, choices=("ecc_uncorrected",)),), _build_rise
    ),
}
"""The GPU rule types (`logwatch.rules.registry` assembles every rule type)."""


def is_gpu_rule(rule: object) -> bool:
    """Whether a compiled rule reads GPU frames (the live GPU monitor runs these)."""
    return isinstance(rule, GpuRule)


def needs_nvml(rule: object) -> bool:
    """Whether a rule can only fire on live NVML samples, never on a log alone."""
    return isinstance(rule, GpuRule) and rule.nvml_only
