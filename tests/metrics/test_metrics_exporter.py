"""The exporter plugin inside a real tail driver: the contract's series from real files and a
fake GPU reader, `[gpu] export = false`, and sources that went away dropped after a while."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from logwatch.cluster_config import PrometheusConfig
from logwatch.config import Config
from logwatch.errors import ConfigError
from logwatch.gpu.link import start_gpu_link
from logwatch.gpu.model import GpuSettings
from logwatch.gpu.sampler import start_gpu
from logwatch.metrics.exporter import MetricsExporter, start_exporter
from logwatch.sinks.base import ListSink
from logwatch.testing import FakeGpuReader
from tests.support.tailkit import BUILTIN, Tail

LOG = "run start: run_id=r9\nstep=10 loss=2.5 q_hs=7\nstep=11 loss=nan q_hs=3\n"


def samples(exporter: MetricsExporter) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample a scrape gets now, by (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(exporter.text())
        for s in family.samples
    }


def run_round(tmp_path: Path, exporter: MetricsExporter) -> Tail:
    tail = Tail(tmp_path, rules=BUILTIN, plugins=[exporter])
    tail.driver.open()
    tail.driver.poll_once()
    return tail


def test_series_from_a_followed_log_and_the_gpus(tmp_path: Path) -> None:
    """Lines, last step, last finite loss, q_hs, the firing alert with its run, and per-GPU
    values from the sampler's latest round (utilization as a ratio)."""
    log = tmp_path / "train.log"
    log.write_text(LOG, encoding="utf-8")
    gpu = start_gpu(GpuSettings(), FakeGpuReader(count=2), run=False)
    assert gpu.sampler is not None and gpu.sampler.poll()
    exporter = MetricsExporter(gpu=gpu, backlogs={"alertmanager": lambda: 3})
    tail = run_round(tmp_path, exporter)
    try:
        got = samples(exporter)
    finally:
        tail.driver.close()
    source = str(log)
    assert got[("logwatch_lines_total", (("source", source),))] == 3.0
    assert got[("logwatch_last_step", (("run", "r9"), ("source", source)))] == 11.0
    assert got[("logwatch_loss", (("run", "r9"), ("source", source)))] == 2.5
    assert got[("logwatch_q_hs", (("source", source),))] == 3.0
    active = (("rule", "nan-loss"), ("run", "r9"), ("severity", "critical"), ("source", source))
    assert got[("logwatch_alert_active", active)] == 1.0
    assert got[("logwatch_delivery_queue_depth", (("sink", "alertmanager"),))] == 3.0
    assert got[("logwatch_nvml_up", ())] == 1.0
    util = ("logwatch_gpu_utilization_ratio", (("gpu", "1"), ("uuid", "GPU-fake-0001")))
    assert got[util] == 0.95
    assert ("logwatch_build_info", (("version", "0.1.0"),)) in got


def test_gpu_export_false_leaves_the_gpu_series_out(tmp_path: Path) -> None:
    """Where dcgm-exporter runs, `[gpu] export = false`: no logwatch_gpu_* series, NVML's
    status stays."""
    (tmp_path / "train.log").write_text(LOG, encoding="utf-8")
    gpu = start_gpu(GpuSettings(), FakeGpuReader(count=1), run=False)
    assert gpu.sampler is not None and gpu.sampler.poll()
    exporter = MetricsExporter(gpu=gpu, export_gpu=False)
    tail = run_round(tmp_path, exporter)
    try:
        names = {name for name, _ in samples(exporter)}
    finally:
        tail.driver.close()
    assert not {n for n in names if n.startswith("logwatch_gpu_")}
    assert "logwatch_nvml_up" in names


def test_a_source_that_went_away_is_dropped(tmp_path: Path) -> None:
    """A file no longer followed keeps its series `forget_after_s`, then they go (bounded
    cardinality); the alert counters stay."""
    log = tmp_path / "train.log"
    log.write_text(LOG, encoding="utf-8")
    exporter = MetricsExporter(forget_after_s=0.0)
    tail = run_round(tmp_path, exporter)
    try:
        assert any(name == "logwatch_lines_total" for name, _ in samples(exporter))
        log.unlink()
        tail.driver.files.drop(next(iter(tail.driver.files.followers.values())))
        tail.driver.poll_once()  # notes it gone
        tail.driver.poll_once()  # forgets it
        got = samples(exporter)
    finally:
        tail.driver.close()
    assert not any(name == "logwatch_lines_total" for name, _ in got)
    assert got[("logwatch_alerts_total", (("rule", "nan-loss"), ("status", "firing")))] == 1.0


class ClosingSink(ListSink):
    """A sink that remembers being closed."""

    closed = False

    def close(self) -> None:
        self.closed = True


def test_start_exporter_follows_the_config(tmp_path: Path) -> None:
    """No `[prometheus]`: no exporter; a textfile folder: an exporter writing logwatch.prom there."""
    assert start_exporter(Config(), [ListSink()], None) is None
    config = Config(prometheus=PrometheusConfig(textfile_dir=tmp_path))
    exporter = start_exporter(config, [ListSink()], None)
    assert exporter is not None and exporter.textfile == tmp_path / "logwatch.prom"
    exporter.close()
    assert "logwatch_up 0.0" in (tmp_path / "logwatch.prom").read_text()


def test_start_exporter_that_cannot_start_closes_the_sinks_and_gpus(tmp_path: Path) -> None:
    """A textfile folder that does not exist: the typed error goes up, and the sinks and the GPU
    side opened before it are closed (nothing keeps running)."""
    sinks = [ClosingSink(), ClosingSink()]
    reader = FakeGpuReader(count=1)
    gpu = start_gpu_link(GpuSettings(), reader, [], lambda line: None)
    config = Config(prometheus=PrometheusConfig(textfile_dir=tmp_path / "missing"))
    with pytest.raises(ConfigError, match="no such folder"):
        start_exporter(config, sinks, gpu)
    assert [sink.closed for sink in sinks] == [True, True]
    assert reader.closed
