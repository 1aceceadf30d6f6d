"""The DFlash log: its queue report, snapshot and run-start lines (its step, queue and snapshot
lines are also cut by position: `parse.shapes`)."""

from __future__ import annotations

Q_HS_PATTERN = r"(?:^|[^\w])q_hs\s*[=:]\s*(\d+)"
Q_HSB_PATTERN = r"(?:^|[^\w])q_hsb\s*[=:]\s*\[([^\]]*)\]"
# a line of `key=value` telemetry pairs (`gpu/0/util=97`): its word, then the pairs
SNAPSHOT_LITERAL = "snapshot"
SNAPSHOT_WORD = r"\bsnapshot\b"
# a run's first line: where a batch is cut and the engine's rules restart
RUN_START_LITERAL = "run start:"
PID_PATTERN = r"\bpid=(\d+)"
