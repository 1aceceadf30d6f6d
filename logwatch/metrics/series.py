"""What logwatch knows as Prometheus series: one thread-safe table, read at scrape time.

The series names and labels are a contract (README, "Many nodes"). No step, value or time is
ever a label; the series of a source that went away are dropped after `forget_after_s`.
`MetricsTable.collect()` is a prometheus-client custom collector: it builds every family from
the table when scraped, so nothing is kept twice and nothing has to be unregistered.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from logwatch import __version__
from logwatch.gpu.model import GpuSample

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

GPU_SERIES: tuple[tuple[str, str, Callable[[GpuSample], float | None]], ...] = (
    (
        "logwatch_gpu_utilization_ratio",
        "GPU utilization (NVML), 0 to 1",
        lambda s: None if s.util_gpu is None else s.util_gpu / 100.0,
    ),
    (
        "logwatch_gpu_memory_utilization_ratio",
        "GPU memory bandwidth utilization (NVML), 0 to 1",
        lambda s: None if s.util_mem is None else s.util_mem / 100.0,
    ),
    ("logwatch_gpu_memory_used_bytes", "GPU memory used", lambda s: s.mem_used_bytes),
    ("logwatch_gpu_memory_total_bytes", "GPU memory in total", lambda s: s.mem_total_bytes),
    ("logwatch_gpu_power_watts", "GPU power draw", lambda s: s.power_w),
    ("logwatch_gpu_power_limit_watts", "GPU power limit", lambda s: s.power_limit_w),
    ("logwatch_gpu_temperature_celsius", "GPU temperature", lambda s: s.temp_c),
    (
        "logwatch_gpu_ecc_uncorrected_errors",
        "uncorrected ECC errors NVML counts (volatile)",
        lambda s: s.ecc_uncorrected,
    ),
    ("logwatch_gpu_lost", "1 when NVML says the GPU is lost", lambda s: float(s.lost)),
)


@dataclass(slots=True)
class SourceSeries:
    """One followed log's values."""

    run: str = ""
    lines: int = 0
    last_line_s: float | None = None  # wall clock (epoch s) when its last line arrived
    last_step: int | None = None
    loss: float | None = None
    q_hs: int | None = None
    gone_since: float | None = None  # monotonic s since it is no longer followed


@dataclass(frozen=True, slots=True)
class ActiveAlert:
    """The labels of a firing alert's series."""

    rule: str
    severity: str
    source: str
    run: str


@dataclass(slots=True, eq=False)  # eq=False: hashable, as a registered collector must be
class MetricsTable:
    """Everything `/metrics` and the textfile show; written by the tail thread, read by scrapes."""

    backlogs: Mapping[str, Callable[[], int]] = field(default_factory=dict)
    action_runs: Callable[[], Mapping[tuple[str, str], int]] | None = None  # ActionSink's counts
    export_gpu: bool = True
    sources: dict[str, SourceSeries] = field(default_factory=dict)
    active: dict[str, ActiveAlert] = field(default_factory=dict)
    alerts_total: Counter[tuple[str, str]] = field(default_factory=Counter)
    tail_lag_s: float = 0.0
    nvml_up: bool | None = None  # None: GPUs off (--gpu off)
    gpus: tuple[GpuSample, ...] = ()
    up: bool = True
    lock: threading.Lock = field(default_factory=threading.Lock)

    def collect(self) -> Iterator[Metric]:
        """prometheus-client's collector hook: every family, from the table as it is now."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        def gauge(name: str, doc: str, labels: list[str] | None = None) -> Any:
            return GaugeMetricFamily(name, doc, labels=labels)

        with self.lock:
            up = gauge("logwatch_up", "1 while logwatch runs")
            up.add_metric([], 1.0 if self.up else 0.0)
            info = gauge("logwatch_build_info", "logwatch's version", ["version"])
            info.add_metric([__version__], 1.0)
            yield from (up, info)
            active = gauge(
                "logwatch_alert_active", "1 while firing", ["rule", "severity", "source", "run"]
            )
            for a in self.active.values():
                active.add_metric([a.rule, a.severity, a.source, a.run], 1.0)
            total = CounterMetricFamily(
                "logwatch_alerts", "alert events so far", labels=["rule", "status"]
            )
            for (rule, status), count in sorted(self.alerts_total.items()):
                total.add_metric([rule, status], float(count))
            yield from (active, total)
            yield from self._source_families(gauge, CounterMetricFamily)
            lag = gauge("logwatch_tail_lag_seconds", "how far tail is behind its files")
            lag.add_metric([], self.tail_lag_s)
            queue = gauge(
                "logwatch_delivery_queue_depth", "what sinks still have to deliver", ["sink"]
            )
            for sink, backlog in sorted(self.backlogs.items()):
                queue.add_metric([sink], float(backlog()))
            yield from (lag, queue)
            if self.action_runs is not None:
                runs = CounterMetricFamily(
                    "logwatch_action_runs",
                    "[[action]] outcomes so far: ok, failed, timeout, skipped, capped, cancelled, "
                    "dry_run, interrupted",
                    labels=["action", "outcome"],
                )
                for (action, outcome), count in sorted(self.action_runs().items()):
                    runs.add_metric([action, outcome], float(count))
                yield runs
            if self.nvml_up is not None:
                nvml = gauge("logwatch_nvml_up", "1 when NVML works on this host")
                nvml.add_metric([], 1.0 if self.nvml_up else 0.0)
                yield nvml
            if self.export_gpu:
                yield from self._gpu_families(gauge)

    def _source_families(self, gauge: Callable[..., Any], counter: Any) -> Iterator[Metric]:
        lines = counter("logwatch_lines", "lines read", labels=["source"])
        last = gauge(
            "logwatch_last_line_timestamp_seconds",
            "wall clock when the last line arrived",
            ["source"],
        )
        step = gauge("logwatch_last_step", "last step seen", ["source", "run"])
        loss = gauge("logwatch_loss", "last finite loss", ["source", "run"])
        q_hs = gauge("logwatch_q_hs", "last queue depth", ["source"])
        for name, s in sorted(self.sources.items()):
            lines.add_metric([name], float(s.lines))
            if s.last_line_s is not None:
                last.add_metric([name], s.last_line_s)
            if s.last_step is not None:
                step.add_metric([name, s.run], float(s.last_step))
            if s.loss is not None:
                loss.add_metric([name, s.run], s.loss)
            if s.q_hs is not None:
                q_hs.add_metric([name], float(s.q_hs))
        yield from (lines, last, step, loss, q_hs)

    def _gpu_families(self, gauge: Callable[..., Any]) -> Iterator[Metric]:
        for name, doc, read in GPU_SERIES:
            family = gauge(name, doc, ["gpu", "uuid"])
            for sample in self.gpus:
                value = read(sample)
                if value is not None and math.isfinite(value):
                    family.add_metric([str(sample.index), sample.uuid], float(value))
            yield family
