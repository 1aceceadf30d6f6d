"""Where an alert happened: the log's host (`labels.host`, placed from a fleet's rank log) in
Alertmanager's and the webhook's labels and in Slack's header, the watching machine otherwise."""

from __future__ import annotations

from dataclasses import replace

from logwatch.alerts import AlertEvent
from logwatch.sinks.alertmanager.payload import Identity, alert_labels
from logwatch.sinks.slack.messages import where_parts
from logwatch.sinks.webhook.payload import GroupAlert, group_payload
from tests.support.slackhelp import T0, alert

WATCHER = Identity(host="watcher-1")


def _on(host: str | None, source: str = "run/train.log") -> AlertEvent:
    event = alert(source=source)
    if host is None:
        return event
    return replace(event, labels={**event.labels, "host": host, "rank": "139"})


def test_alertmanager_labels_name_the_logs_host_and_the_watcher_as_instance() -> None:
    """An event placed on node-017 is `host` node-017, `instance` the watcher; an event with
    no host of its own is the watcher's `host`, with no `instance`."""
    placed = alert_labels(_on("node-017"), WATCHER)
    assert (placed["host"], placed["instance"], placed["rank"]) == ("node-017", "watcher-1", "139")
    plain = alert_labels(_on(None), WATCHER)
    assert plain["host"] == "watcher-1" and "instance" not in plain
    same = alert_labels(_on("watcher-1"), WATCHER)
    assert same["host"] == "watcher-1" and "instance" not in same


def test_a_static_instance_label_is_kept() -> None:
    """The config's static `instance` is not replaced by the watcher's name."""
    identity = Identity(host="watcher-1", labels={"instance": "pod-3:9100"})
    assert alert_labels(_on("node-017"), identity)["instance"] == "pod-3:9100"


def test_the_webhook_payload_names_the_logs_host() -> None:
    """The webhook (Alertmanager's payload) carries the same labels."""
    body = group_payload("nan-loss", [GroupAlert(_on("node-017"), T0, None)], WATCHER)
    [told] = body["alerts"]
    assert (told["labels"]["host"], told["labels"]["instance"]) == ("node-017", "watcher-1")


def test_slack_header_names_the_logs_host_or_how_many() -> None:
    """One host for every event: that host; several: `N hosts`; an event without one: the
    watcher's."""
    assert where_parts([_on("node-017")], host="watcher-1")[0] == "node-017 · "
    two = [_on("node-017", "a.log"), _on("node-018", "b.log")]
    assert where_parts(two, host="watcher-1")[0] == "2 hosts · "
    mixed = [_on("node-017", "a.log"), _on(None, "b.log")]
    assert where_parts(mixed, host="watcher-1")[0] == "watcher-1 · "
