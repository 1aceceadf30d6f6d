"""The header of each run: the verdict sentence and the counts, from a real replay."""

from __future__ import annotations

import logwatch
from logwatch.report.page import run_header
from tests.support.paths import SAMPLES

NAN = str(SAMPLES / "dflash" / "train_nan.log")
RESTARTED = str(SAMPLES / "dflash" / "train_restarted.log")
HEALTHY = str(SAMPLES / "dflash" / "train_healthy.log")


def test_verdict_names_the_first_critical_alert_and_when() -> None:
    """train_nan: NaN loss at step 1403, 6m53s after the log's first line; the verdict names
    every rule still firing at the end, as the header's "still firing" does (the NaN that
    came back at step 1430 included)."""
    result = logwatch.replay(NAN)
    header = run_header(
        NAN, result.stats[NAN], ["run start: run_id=slammed2 host=gpu-07"], result.events
    )
    assert (
        header.verdict
        == "NaN loss at step 1403 after 6m53s; still firing at the end: nan-loss, run-crashed."
    )
    assert (header.run, header.host, header.steps, header.restarts) == (
        "slammed2",
        "gpu-07",
        "1300..1430",
        0,
    )
    assert header.alerts == "4 critical"
    assert header.firing == "nan-loss (line 140), run-crashed (line 145)"


def test_verdict_says_restarts_and_what_is_left_firing() -> None:
    """train_restarted: the OOM (its untimed line takes the time of the line before it, 34 s
    in), one restart, and the NCCL timeout / lost GPU at the end, in the header's order."""
    result = logwatch.replay(RESTARTED)
    header = run_header(RESTARTED, result.stats[RESTARTED], [], result.events)
    assert header.verdict == (
        "CUDA out of memory at step 90 after 34s; restarted once; "
        "still firing at the end: nccl-timeout, gpu-lost."
    )
    assert header.host == "not in the log"
    assert header.firing == "nccl-timeout (line 21), nccl-timeout (line 22), gpu-lost (line 23)"


def test_healthy_run_says_no_alerts() -> None:
    """A healthy log's verdict is plain."""
    result = logwatch.replay(HEALTHY)
    stats = result.stats[HEALTHY]
    header = run_header(HEALTHY, stats, [], result.events)
    assert header.verdict == f"No alerts over steps {stats.first_step}..{stats.last_step}."
