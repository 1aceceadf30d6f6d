"""The GPU rows of a log batch, read once and shared by its GPU rules, and a rule's step on a
log batch (a GPU rule reads those rows, a log rule the frame)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import polars as pl

from logwatch.engine.batch import (
    Prepared,
)
from logwatch.engine.state import (
    Step,
)
from logwatch.gpu.log_rows import DroppedPair
from logwatch.rules.base import Transition
from logwatch.rules.gpu import GpuRule, HoldRule, LogGpuRows, log_gpu_rows
from logwatch.rules.loader import RuleSpec


def _gpu_keys_present(frame: pl.DataFrame) -> pl.Expr:
    """Whether some line of `frame` has `gpu/` snapshot keys (its GPU frame has rows)."""
    has_keys = (
        pl.col("gpu_keys").fill_null(0) > 0
        if "gpu_keys" in frame.columns
        else pl.col("snapshot").fill_null(False)
    )
    return has_keys.any()


class _LazyGpuFrame:
    """The GPU rows of one log batch, read on first use (or taken from `prepared`) and shared
    by that batch's GPU rules; `empty`, when known, whether the batch has no GPU keys; `said`
    is handed the snapshot pairs the rows left out, when they are first read."""

    __slots__ = ("_empty", "_frame", "_metrics", "_prepared", "_rows", "_said")

    def __init__(
        self,
        frame: pl.DataFrame,
        prepared: Prepared | None = None,
        metrics: frozenset[str] | None = None,
        empty: bool | None = None,
        said: Callable[[Sequence[DroppedPair]], None] | None = None,
    ) -> None:
        self._frame = frame
        self._prepared = prepared
        self._metrics = metrics  # the snapshot metrics its rules read (None: all)
        self._rows: LogGpuRows | None = None
        self._empty: bool | None = empty
        self._said = said

    def rows(self) -> LogGpuRows:
        """The batch's GPU rows (`log_gpu_rows`), read once."""
        if self._rows is None:
            ready = self._prepared
            if ready is not None and ready.error is not None:
                raise ready.error
            if ready is not None and ready.gpu_rows is not None:
                self._rows = ready.gpu_rows
            else:
                self._rows = log_gpu_rows(self._frame, self._metrics)
            if self._rows.dropped and self._said is not None:
                self._said(self._rows.dropped)
        return self._rows

    def get(self) -> pl.DataFrame:
        """The batch's whole GPU frame (for GPU rules that are no `HoldRule`), built once."""
        return self.rows().frame()

    def empty(self) -> bool:
        """Whether the batch has no `gpu/` snapshot keys (its GPU frame would have no rows)."""
        if self._empty is None:
            self._empty = not self._frame.select(_gpu_keys_present(self._frame)).item()
        return self._empty


def _unchanged(state: dict[str, Any]) -> tuple[list[Transition], dict[str, Any]]:
    return [], state


def _log_step(
    spec: RuleSpec, gpu_rule: GpuRule | None, frame: pl.DataFrame, gpu_frame: _LazyGpuFrame
) -> Step:
    """A rule's step on a log batch: a GPU rule reads the batch's GPU frame, and an NVML-only
    one nothing (it keeps its state, as it did when it saw log frames itself)."""
    if gpu_rule is None:
        return partial(spec.rule.evaluate, frame)
    if gpu_rule.nvml_only:
        return _unchanged
    return partial(_gpu_step, gpu_rule, gpu_frame)


def _gpu_step(
    rule: GpuRule, gpu_frame: _LazyGpuFrame, state: dict[str, Any]
) -> tuple[list[Transition], dict[str, Any]]:
    # The frame is built inside the step, so a batch whose snapshot keys break it is reported as
    # that rule's error (the engine goes on), and a rule switched off never builds it. A batch
    # without GPU keys gives an empty frame, on which no GPU rule moves: skipped (most batches).
    if gpu_frame.empty():
        return [], state
    if isinstance(rule, HoldRule):  # reads only the rows of its own metrics
        return rule.evaluate_log(gpu_frame.rows(), state)
    return rule.evaluate_gpu(gpu_frame.get(), state)
