"""Cost of Slack notification on the caller's (tailing) path, per alert, vs a plain file sink.

Both sinks get the same AlertEvents. The baseline writes a JSON line per event to a file (what
`--format jsonl` costs); the Slack sink runs the lifecycle and appends + fsyncs the spool record
(delivery happens on the worker thread, against the loopback fake, and is not timed here).
Prints ratios, measured in the same run. Usage: .venv/bin/python bench/bench_slack_enqueue.py [N]
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from logwatch.alerts import AlertEvent, Severity
from logwatch.config import AlertsConfig, Config, SlackConfig
from logwatch.sinks.base import StreamSink
from logwatch.sinks.slack.delivery import DeliveryPolicy
from logwatch.sinks.slack.sink import open_slack_sink
from logwatch.testing import FakeClock, FakeSlack


def events(n: int) -> list[AlertEvent]:
    """n distinct firing alerts (distinct rules, so each one is its own message)."""
    return [
        AlertEvent(
            f"rule-{i}",
            Severity.CRITICAL,
            "firing",
            "train.log",
            i,
            datetime(2026, 1, 1),
            i,
            float("nan"),
            "loss is nan",
            "fix",
            "step=1 loss=nan",
        )
        for i in range(n)
    ]


def per_event_us(emit, batch: list[AlertEvent]) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    for event in batch:
        emit(event)
    return (time.perf_counter() - start) / len(batch) * 1e6


def main(n: int) -> None:
    batch = events(n)
    with tempfile.TemporaryDirectory() as tmp, FakeSlack(rate_per_s=None) as fake:
        with open(Path(tmp) / "alerts.jsonl", "w") as out:
            base = per_event_us(StreamSink(out, fmt="jsonl").emit, batch)
        slack = SlackConfig("C0ALERTS01", fake.base_url, 2.0, token=fake.token)
        config = Config(slack=slack, alerts=AlertsConfig(group_wait_s=0.0))
        sink = open_slack_sink(
            config,
            Path(tmp) / "state",
            clock=FakeClock(),
            policy=DeliveryPolicy(pace_s=0.0),
        )
        slack_us = per_event_us(sink.emit, batch)
        sink.drain_s = 60.0
        sink.close()
        grouped = [
            AlertEvent(
                "nan-loss",
                e.severity,
                "firing",
                f"rank{e.line}.log",
                1,
                e.ts,
                1,
                e.value,
                "nan",
                "",
                "",
            )
            for e in batch
        ]
        config = Config(slack=slack, alerts=AlertsConfig(group_wait_s=10.0))
        sink = open_slack_sink(
            config,
            Path(tmp) / "state2",
            clock=FakeClock(),
            policy=DeliveryPolicy(pace_s=0.0),
        )
        grouped_us = per_event_us(sink.emit, grouped)
        sink.close()
    print(f"events: {n}")
    print(f"baseline StreamSink(jsonl) to a file: {base:8.1f} us/event")
    print(
        f"SlackSink.emit (lifecycle + fsynced spool): {slack_us:8.1f} us/event  ({slack_us / base:.0f}x baseline)"
    )
    print(
        f"SlackSink.emit, one rule on {n} sources within group_wait: {grouped_us:8.1f} us/event  ({grouped_us / base:.0f}x baseline)"
    )
    print(f"messages delivered by the worker: {len(fake.posts())} (= {n} + 1 grouped)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
