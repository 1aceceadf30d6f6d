"""logwatch: watch ML training runs through their logs and GPUs.

    import logwatch
    frame = logwatch.read_log("train.log")              # every line, as a polars frame
    result = logwatch.replay(["train.log"])              # the built-in rules over it
    result.events, result.events_frame(), result.stats["train.log"]

Only the names in `__all__` are the API; the modules behind them may move.
"""

from logwatch.alerts import AlertEvent, Severity
from logwatch.api import load_config_and_rules, load_rules, replay
from logwatch.drivers.replay import ReplayResult, read_log, scan_log
from logwatch.engine import Engine, SourceStats
from logwatch.errors import (
    ConfigError,
    GpuUnavailableError,
    InputError,
    LogwatchError,
    RulesError,
    SilenceError,
    SpoolLockedError,
    StateError,
)
from logwatch.parse import SCHEMA
from logwatch.rules.loader import RuleSpec
from logwatch.sinks.base import ListSink, Sink, StreamSink

__version__ = "0.1.0"

__all__ = [
    "SCHEMA",
    "AlertEvent",
    "ConfigError",
    "Engine",
    "GpuUnavailableError",
    "InputError",
    "ListSink",
    "LogwatchError",
    "ReplayResult",
    "RuleSpec",
    "RulesError",
    "Severity",
    "SilenceError",
    "Sink",
    "SourceStats",
    "SpoolLockedError",
    "StateError",
    "StreamSink",
    "__version__",
    "load_config_and_rules",
    "load_rules",
    "read_log",
    "replay",
    "scan_log",
]
