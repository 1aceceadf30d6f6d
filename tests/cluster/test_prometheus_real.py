"""The metrics against the real Prometheus tools: a scrape of `tail --metrics` answering PromQL,
the node-exporter textfile, and `replay --export-metrics` backfilled with promtool."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.clusterkit import NAN, RUN, START, append
from tests.cluster.conftest import Cluster
from tests.cluster.engines import PROMTOOL, binary, free_port, wait_for
from tests.support.paths import ROOT, SAMPLES

DEAD_MAN = "time() - logwatch_last_line_timestamp_seconds > 600"


def test_prometheus_scrapes_metrics_and_promql_finds_the_alert_and_the_dead_log(
    cluster: Cluster,
) -> None:
    """Prometheus scrapes `tail --metrics`: `logwatch_alert_active == 1` returns the firing NaN
    with its run, and the dead-man expression returns exactly the log quiet for 20 minutes."""
    folder = cluster.root / "n1"
    folder.mkdir()
    quiet = folder / "quiet.log"
    quiet.write_text("step=7 loss=3.0\n", encoding="utf-8")
    twenty_min_ago = time.time() - 1200
    os.utime(quiet, (twenty_min_ago, twenty_min_ago))
    address = f"127.0.0.1:{free_port()}"
    node = cluster.node("n1", "", "--metrics", address, log=START)
    node.wait_following()
    append(node.folder / "train.log", NAN)
    prom = cluster.prometheus([address]).start()
    [firing] = wait_for(lambda: prom.query("logwatch_alert_active == 1"), 60, "alert_active")
    assert firing["metric"]["rule"] == "nan-loss"
    assert firing["metric"]["run"] == RUN
    assert firing["metric"]["source"] == str(node.folder / "train.log")
    [dead] = wait_for(lambda: prom.query(DEAD_MAN), 30, "the dead-man series")
    assert dead["metric"]["source"] == str(quiet)
    [up] = prom.query("logwatch_up")
    assert up["value"][1] == "1"
    assert node.said(f"metrics on http://{address}/metrics")


def test_textfile_for_node_exporter_holds_the_series(cluster: Cluster) -> None:
    """`--metrics-textfile DIR` writes DIR/logwatch.prom in the text format, with the lines read
    and the firing alert; a clean stop leaves `logwatch_up 0` in it."""
    collector = cluster.root / "textfile"
    collector.mkdir()
    node = cluster.node("n1", "", "--metrics-textfile", str(collector), log=START)
    node.wait_following()
    append(node.folder / "train.log", NAN)
    wait_for(lambda: node.out, 30, "the alert on stdout")
    assert node.stop() == 0
    text = (collector / "logwatch.prom").read_text(encoding="utf-8")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    source = str(node.folder / "train.log")
    assert samples[("logwatch_up", ())] == 0.0
    assert samples[("logwatch_lines_total", (("source", source),))] == 3.0
    key = (("rule", "nan-loss"), ("run", RUN), ("severity", "critical"), ("source", source))
    assert samples[("logwatch_alert_active", key)] == 1.0


def test_replay_export_metrics_backfills_with_promtool(tmp_path: Path) -> None:
    """`replay --export-metrics` writes OpenMetrics that `promtool tsdb create-blocks-from
    openmetrics` turns into a block holding every series."""
    promtool = binary(PROMTOOL)
    out = tmp_path / "metrics.om"
    log = SAMPLES / "dflash" / "train_nan.log"
    done = subprocess.run(
        [sys.executable, "-m", "logwatch", "replay", str(log), "--export-metrics", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    assert text.endswith("# EOF\n")
    samples = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    assert f"{samples} metric samples written to {out}" in done.stderr
    blocks = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(out), str(tmp_path / "tsdb")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert blocks.returncode == 0, blocks.stderr + blocks.stdout
    [row] = [line.split() for line in blocks.stdout.splitlines()[1:] if line.strip()]
    assert int(row[4]) == samples  # NUM SAMPLES: every sample written went in
    for series in ("logwatch_loss{", "logwatch_last_step{", "logwatch_alert_active{"):
        assert series in text
    assert 'logwatch_alerts_total{rule="nan-loss",status="firing"}' in text
