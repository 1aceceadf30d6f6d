"""`replay --export-metrics FILE`: the same series as `/metrics`, as OpenMetrics text with the
log's own timestamps, so a post-mortem can be backfilled into Prometheus:

    promtool tsdb create-blocks-from openmetrics FILE DATA_DIR

Batches are folded as they are replayed (one vectorized aggregate per batch: one point per
source and second of log time); lines without a timestamp carry no point. Log times without a
zone are taken as this host's local time, as the timeline prints them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import polars as pl

from logwatch.alerts import FIRING, AlertEvent
from logwatch.atomic import write_atomic
from logwatch.engine.state import _RUN_ID
from logwatch.errors import InputError

_POINTS = {"source": pl.String, "sec": pl.Int64, "run": pl.String} | {
    "line": pl.Int64,
    "step": pl.Int64,
    "loss": pl.Float64,
    "q_hs": pl.Int64,
}
GAUGES = (
    ("logwatch_last_step", "step", "last step seen", ("source", "run")),
    ("logwatch_loss", "loss", "last finite loss", ("source", "run")),
    ("logwatch_q_hs", "q_hs", "last queue depth", ("source",)),
)


def _utc_offset_s() -> int:
    offset = datetime.now().astimezone().utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


class MetricsTimeline:
    """Collects replayed batches and alert events, then writes them as one OpenMetrics file."""

    def __init__(self) -> None:
        self._points: list[pl.DataFrame] = []
        self._events: list[AlertEvent] = []
        self._runs: dict[str, str | None] = {}  # the run each source's last batch ended in
        self._offset_s = _utc_offset_s()

    def add_frame(self, frame: pl.DataFrame) -> None:
        """Fold one parsed batch (any size) into per-second points."""
        if frame.is_empty():
            return
        source = frame.get_column("source")[0]
        carried = self._runs.get(source)
        runs = frame.select(
            pl.when(pl.col("run_start"))
            .then(pl.col("text").str.extract(_RUN_ID.pattern, 1))
            .otherwise(None)
            .forward_fill()
            .fill_null(pl.lit(carried, dtype=pl.String))
            .alias("run")
        ).get_column("run")
        self._runs[source] = runs[-1]
        timed = frame.with_columns(runs).filter(pl.col("ts").is_not_null())
        if timed.is_empty():
            return
        self._points.append(self._per_second(timed))

    def _per_second(self, frame: pl.DataFrame) -> pl.DataFrame:
        sec = pl.col("ts").dt.epoch("s") - self._offset_s
        return (
            frame.with_columns(sec.alias("sec"))
            .group_by("source", "sec", maintain_order=True)
            .agg(
                pl.col("run").last(),
                pl.col("line").max(),
                pl.col("step").drop_nulls().last(),
                pl.col("loss").filter(pl.col("loss").is_finite()).last(),
                pl.col("q_hs").drop_nulls().last(),
            )
            .select(list(_POINTS))
            .cast(_POINTS)  # type: ignore[arg-type]  # a dict of dtypes, as polars accepts
        )

    def add_event(self, event: AlertEvent) -> None:
        """Keep an alert event (its log time is the point's time)."""
        if event.ts is not None:
            self._events.append(event)

    def write(self, path: Path) -> int:
        """Write the file atomically; the number of samples in it."""
        lines: list[str] = []
        points = (
            pl.concat(self._points)
            .group_by("source", "sec", maintain_order=True)
            .agg(pl.all().drop_nulls().last())
            if self._points
            else pl.DataFrame(schema=_POINTS)
        )
        count = self._families(points, lines)
        count += self._alert_families(lines)
        lines.append("# EOF")
        try:
            write_atomic(path, ("\n".join(lines) + "\n").encode(), mode=0o644)
        except OSError as exc:
            raise InputError(
                f"--export-metrics {path}: cannot write ({exc.strerror}); pick a writable path"
            ) from None
        return count

    def _families(self, points: pl.DataFrame, out: list[str]) -> int:
        count = _family(
            out,
            "logwatch_lines",
            "counter",
            "lines read",
            _samples(points, "line", ("source",), name="logwatch_lines_total"),
        )
        for name, column, doc, labels in GAUGES:
            count += _family(out, name, "gauge", doc, _samples(points, column, labels, name=name))
        return count

    def _alert_families(self, out: list[str]) -> int:
        rows = [
            {
                "rule": e.rule,
                "severity": e.severity.label,
                "source": e.source,
                "run": e.run or "",
                "status": str(e.status),
                "sec": int(e.ts.timestamp()) if e.ts is not None else 0,
                "active": 1 if e.status == FIRING else 0,
            }
            for e in self._events
        ]
        events = pl.DataFrame(
            rows,
            schema={"rule": pl.String, "severity": pl.String, "source": pl.String}
            | {"run": pl.String, "status": pl.String, "sec": pl.Int64, "active": pl.Int64},
        )
        active = events.group_by(
            "rule", "severity", "source", "run", "sec", maintain_order=True
        ).agg(pl.col("active").last())
        totals = (
            events.sort("sec", maintain_order=True)
            .with_columns((pl.int_range(pl.len()) + 1).over("rule", "status").alias("total"))
            .group_by("rule", "status", "sec", maintain_order=True)
            .agg(pl.col("total").last())
        )
        labels = ("rule", "severity", "source", "run")
        count = _family(
            out,
            "logwatch_alert_active",
            "gauge",
            "1 while firing",
            _samples(active, "active", labels, name="logwatch_alert_active"),
        )
        return count + _family(
            out,
            "logwatch_alerts",
            "counter",
            "alert events so far",
            _samples(totals, "total", ("rule", "status"), name="logwatch_alerts_total"),
        )


def _escape(column: str) -> pl.Expr:
    """An OpenMetrics label value: backslash, double quote and newline escaped."""
    return (
        pl.col(column)
        .fill_null("")
        .str.replace_all("\\", "\\\\", literal=True)
        .str.replace_all('"', '\\"', literal=True)
        .str.replace_all("\n", "\\n", literal=True)
    )


def _samples(frame: pl.DataFrame, column: str, labels: Sequence[str], *, name: str) -> list[str]:
    """`name{labels} value timestamp` lines, each series in time order."""
    rows = frame.filter(pl.col(column).is_not_null()).sort([*labels, "sec"])
    if rows.is_empty():
        return []
    parts: list[pl.Expr | str] = [name, "{"]
    for index, label in enumerate(labels):
        parts += [("," if index else "") + f'{label}="', _escape(label), '"']
    parts += ["} ", pl.col(column).cast(pl.String), " ", pl.col("sec").cast(pl.String)]
    exprs = [pl.lit(p) if isinstance(p, str) else p for p in parts]
    return rows.select(pl.concat_str(exprs).alias("line")).get_column("line").to_list()


def _family(out: list[str], name: str, kind: str, doc: str, samples: list[str]) -> int:
    out += [f"# TYPE {name} {kind}", f"# HELP {name} {doc}", *samples]
    return len(samples)
