"""The engine: rules over frames, alert lifecycles, per-source state. Shared by replay and tail.

Its stages: `plan` (what each rule reads, its gates and the shapes they reach: once, for the
loaded rules), `batch` (what a batch's evaluation uses that no state changes, computed ahead;
cuts at run starts; the step filled in), `evaluate` (each rule's step, quiet gated rules only
where their gate opens), `gpu_rows` (a log batch's GPU rows, shared by its GPU rules),
`lifecycle` (fire once, resolve, end on restart), `summary` (what an alert says), `state` (a
source's state, exported and checked on import), `many` (many sources' batches at once, what
costs a query per source computed for all). `core.Engine` is the one class drivers use.
"""

from __future__ import annotations

from logwatch.engine.batch import Prepared, kept_last, last_step_of
from logwatch.engine.core import Engine
from logwatch.engine.state import (
    STATS_COLUMNS,
    DataWarning,
    ErrorHandler,
    SourceState,
    SourceStats,
    WarningHandler,
    masked,
    run_id,
)
from logwatch.engine.summary import LabelText, format_value, log_message, render_summary

__all__ = [
    "STATS_COLUMNS",
    "DataWarning",
    "Engine",
    "ErrorHandler",
    "LabelText",
    "Prepared",
    "SourceState",
    "SourceStats",
    "WarningHandler",
    "format_value",
    "kept_last",
    "last_step_of",
    "log_message",
    "masked",
    "render_summary",
    "run_id",
]
