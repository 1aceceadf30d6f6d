"""The Prometheus exporter as a tail plugin: it reads batches, alerts, the file set, the sinks'
backlog and the GPU sampler's latest sample, and serves them on `/metrics` or writes them as a
node-exporter textfile, both through prometheus-client.

Per batch it does one vectorized aggregate (lines, last step, last finite loss, last q_hs); per
round it stats only the files that got lines. Scrapes read the table under its lock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import polars as pl

from logwatch.alerts import FIRING, AlertEvent
from logwatch.cluster_config import parse_listen
from logwatch.drivers.plugins import DriverView, Plugin
from logwatch.errors import ConfigError
from logwatch.gpu.sampler import GpuStart
from logwatch.hostinfo import environment_run
from logwatch.metrics.series import ActiveAlert, MetricsTable, SourceSeries
from logwatch.redact import stderr_line
from logwatch.sinks.registry import sink_backlogs


@runtime_checkable
class CountsActions(Protocol):
    """A sink that counts what its actions did (`logwatch.actions.sink.ActionSink`)."""

    def action_counts(self) -> Mapping[tuple[str, str], int]:
        """Outcomes so far, by (action, outcome)."""
        ...


if TYPE_CHECKING:
    from logwatch.config import Config
    from logwatch.gpu.link import GpuLink
    from logwatch.sinks.base import Sink

TEXTFILE = "logwatch.prom"
TEXTFILE_EVERY_S = 5.0
FORGET_AFTER_S = 600.0
"""A source no longer followed keeps its series this long, then they are dropped."""


class MetricsExporter(Plugin):
    """`tail --metrics HOST:PORT` / `--metrics-textfile DIR`, as a TailPlugin named `metrics`."""

    name = "metrics"

    def __init__(
        self,
        *,
        listen: str | None = None,
        textfile_dir: Path | None = None,
        backlogs: Mapping[str, Callable[[], int]] | None = None,
        action_runs: Callable[[], Mapping[tuple[str, str], int]] | None = None,
        gpu: GpuStart | None = None,
        export_gpu: bool = True,
        env_run: str | None = None,
        forget_after_s: float = FORGET_AFTER_S,
        report: Callable[[str], None] = stderr_line,
    ) -> None:
        self.report = report
        self._write_failed = False
        self.table = MetricsTable(
            backlogs=dict(backlogs or {}), action_runs=action_runs, export_gpu=export_gpu
        )
        self.gpu, self.env_run, self.forget_after_s = gpu, env_run or "", forget_after_s
        if gpu is not None:
            self.table.nvml_up = gpu.status is not None and gpu.status.available
        self.textfile = textfile_dir / TEXTFILE if textfile_dir is not None else None
        self._observed: set[str] = set()
        self._caught_up_at: dict[str, float] = {}
        self._seeded = False
        self._last_write = float("-inf")
        self._registry: Any = None
        self._server: Any = None
        self.address: tuple[str, int] | None = None
        self._open(listen)

    def _open(self, listen: str | None) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self.table)
        if self.textfile is not None and not self.textfile.parent.is_dir():
            raise ConfigError(
                f"--metrics-textfile {self.textfile.parent}: no such folder (node-exporter's "
                "--collector.textfile.directory, e.g. /var/lib/node_exporter/textfile_collector)"
            )
        if listen is None:
            return
        host, port = parse_listen(listen, "--metrics / [prometheus] listen")
        try:
            self._server, _ = start_http_server(port, host, registry=self._registry)
        except OSError as exc:
            raise ConfigError(
                f"--metrics {listen}: cannot listen ({exc.strerror}); pick a free port or the "
                "address of an interface of this host"
            ) from None
        self.address = self._server.server_address[:2]

    @property
    def endpoint(self) -> str | None:
        """`http://HOST:PORT/metrics` when serving, for the startup block."""
        if self.address is None:
            return None
        return f"http://{self.address[0]}:{self.address[1]}/metrics"

    def text(self) -> str:
        """What a scrape gets now, in the Prometheus text format."""
        from prometheus_client import generate_latest

        return bytes(generate_latest(self._registry)).decode()

    columns: frozenset[str] | None = frozenset({"source", "step", "loss", "q_hs"})

    def observe(self, frame: pl.DataFrame) -> None:
        """Fold parsed lines (one source's or many's): per source, lines read, last step, last
        finite loss, last q_hs."""
        if frame.is_empty():
            return
        aggs = frame.group_by("source", maintain_order=True).agg(
            pl.len().alias("n"),
            pl.col("step").drop_nulls().last().alias("step"),
            pl.col("loss").filter(pl.col("loss").is_finite()).last().alias("loss"),
            pl.col("q_hs").drop_nulls().last().alias("q_hs"),
        )
        for agg in aggs.iter_rows(named=True):  # a row per source
            source = agg["source"]
            with self.table.lock:
                series = self.table.sources.setdefault(source, SourceSeries(run=self.env_run))
                series.lines += agg["n"]
                series.gone_since = None
                for key in ("step", "loss", "q_hs"):
                    if agg[key] is not None:
                        setattr(series, "last_step" if key == "step" else key, agg[key])
            self._observed.add(source)

    def filter(self, event: AlertEvent) -> AlertEvent | None:
        """Count the event and keep `logwatch_alert_active` in step; it passes unchanged."""
        with self.table.lock:
            self._count(event)
        return event

    def _count(self, event: AlertEvent) -> None:
        self.table.alerts_total[(event.rule, str(event.status))] += 1
        self._set_active(event)

    def _set_active(self, event: AlertEvent) -> None:
        if event.status == FIRING:
            run = event.run or self.env_run
            self.table.active[event.fingerprint] = ActiveAlert(
                event.rule, event.severity.label, event.source, run
            )
        else:
            self.table.active.pop(event.fingerprint, None)

    def round(self, driver: DriverView) -> list[AlertEvent]:
        """Arrival times and lag of the files that got lines, runs, forgotten sources, GPUs."""
        now_mono, wall = time.monotonic(), time.time()
        followers = {f.source: f for f in driver.files.followers.values()}
        with self.table.lock:
            if not self._seeded:  # a restart from a checkpoint: what still fires, unannounced
                self._seeded = True
                for event in driver.engine.active_alerts():
                    self._set_active(event)
            lag = 0.0
            for source in self._observed:
                follower, series = followers.get(source), self.table.sources.get(source)
                if follower is None or series is None:
                    continue
                st = os.fstat(follower.fd)
                series.last_line_s = min(st.st_mtime, wall)
                state = driver.engine.sources.get(source)
                series.run = (state.run_id if state else None) or self.env_run
                if follower.read_offset >= st.st_size:
                    self._caught_up_at[source] = now_mono
                lag = max(lag, now_mono - self._caught_up_at.setdefault(source, now_mono))
            self.table.tail_lag_s = lag
            self._observed.clear()
            self._forget(set(followers), now_mono)
            if self.gpu is not None and self.gpu.sampler is not None:
                self.table.gpus = self.gpu.sampler.latest()
                self.table.nvml_up = not self.gpu.sampler.hung
        if self.textfile is not None and now_mono - self._last_write >= TEXTFILE_EVERY_S:
            self._write_textfile()
            self._last_write = now_mono
        return []

    def _forget(self, followed: set[str], now: float) -> None:
        for source, series in list(self.table.sources.items()):
            if source in followed:
                series.gone_since = None
            elif series.gone_since is None:
                series.gone_since = now
            elif now - series.gone_since >= self.forget_after_s:
                del self.table.sources[source]
                self._caught_up_at.pop(source, None)

    def _write_textfile(self) -> None:
        from prometheus_client import write_to_textfile

        assert self.textfile is not None
        try:
            write_to_textfile(str(self.textfile), self._registry)  # temp file + rename
        except OSError as exc:
            if not self._write_failed:
                self.report(
                    f"{self.textfile}: cannot write the metrics textfile ({exc.strerror}); "
                    "retrying. Fix: make the folder writable for logwatch's user"
                )
            self._write_failed = True
        else:
            self._write_failed = False

    def close(self) -> None:
        """Stop serving; the textfile's last write says `logwatch_up 0`."""
        self.table.up = False
        if self.textfile is not None:
            self._write_textfile()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def exporter_for(
    listen: str | None,
    textfile_dir: Path | None,
    *,
    backlogs: Mapping[str, Callable[[], int]],
    gpu: GpuLink | None,
    export_gpu: bool,
    env_run: str | None,
    action_runs: Callable[[], Mapping[tuple[str, str], int]] | None = None,
) -> MetricsExporter | None:
    """The exporter the options ask for, or None when neither is set."""
    if listen is None and textfile_dir is None:
        return None
    return MetricsExporter(
        listen=listen,
        textfile_dir=textfile_dir,
        backlogs=backlogs,
        action_runs=action_runs,
        gpu=gpu.started if gpu is not None else None,
        export_gpu=export_gpu,
        env_run=env_run,
    )


def start_exporter(
    config: Config, sinks: Sequence[Sink], gpu: GpuLink | None
) -> MetricsExporter | None:
    """The Prometheus exporter the config asks for (`[prometheus]`, with `tail`'s --metrics
    applied; None when it asks for none); when it cannot start, the sinks and the GPU side are
    closed before the error goes up."""
    if config.prometheus is None:
        return None
    try:
        return exporter_for(
            config.prometheus.listen,
            config.prometheus.textfile_dir,
            backlogs=sink_backlogs(sinks, config),
            action_runs=next(
                (sink.action_counts for sink in sinks if isinstance(sink, CountsActions)), None
            ),
            gpu=gpu,
            export_gpu=config.gpu.export,
            env_run=environment_run(),
        )
    except BaseException:
        for sink in sinks:
            sink.close()
        if gpu is not None:
            gpu.close()
        raise
