"""Slack messages never carry mrkdwn control sequences from the log or the config."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from logwatch.sinks.slack.delivery import DeliveryPolicy
from logwatch.sinks.slack.sink import open_slack_sink, send_digest
from logwatch.testing import FakeClock, FakeSlack
from tests.support.slackhelp import T0, alert, slack_config

RAW = ("<!channel>", "<!here>", "<@U0EVIL1>", "<http://evil.example|click>", "<#C0PRIV>")
HOSTILE = "<!channel> <@U0EVIL1> <http://evil.example|click> <#C0PRIV> R&D"


def mrkdwn_texts(message: dict[str, Any]) -> list[str]:
    """The fallback text and every mrkdwn text of a posted message."""
    texts = [message["text"]]
    for block in message["blocks"]:
        parts = [block.get("text") or {}, *block.get("elements", [])]
        texts += [p["text"] for p in parts if p.get("type") == "mrkdwn"]
    return texts


def test_log_text_in_firing_and_resolved_messages_is_escaped(tmp_path: Path) -> None:
    """Summary, log line, source and fix reach Slack as &lt;!channel&gt;, never as <!channel>."""
    event = replace(
        alert(source="run/<!here>.log", text=f"step=5 loss=nan {HOSTILE}"),
        summary=f"loss is nan {HOSTILE}",
        fix="page <!here> & roll back",
    )
    with FakeSlack(rate_per_s=None) as fake:
        config = slack_config(fake, group_wait_s=0.0)
        sink = open_slack_sink(
            config,
            tmp_path,
            clock=FakeClock(T0),
            policy=DeliveryPolicy(pace_s=0.0),
            report=lambda _: None,
            tick_s=None,
        )
        sink.emit(event)
        sink.emit(replace(event, status="resolved", ts=event.ts))
        sink.drain_s = 10.0
        sink.close()
        posted = fake.posts()
    assert posted
    for message in posted:
        for past in [message, *message["edits"]]:
            for text in mrkdwn_texts({"blocks": [], **past}):
                assert not [raw for raw in RAW if raw in text], text
    firing = posted[0]["edits"][0] if posted[0]["edits"] else posted[0]
    shown = json.dumps(firing, ensure_ascii=False)
    assert "&lt;!channel&gt;" in shown and "R&amp;D" in shown and "&lt;!here&gt;" in shown


def test_digest_lines_escape_rule_and_source(tmp_path: Path) -> None:
    """A replay digest names a hostile file name escaped."""
    with FakeSlack(rate_per_s=None) as fake:
        config = slack_config(fake)
        events = [alert(source="logs/<!channel>.log")]
        assert send_digest(config, tmp_path, "replay", events, report=lambda _: None)
        (message,) = fake.posts()
    assert any("&lt;!channel&gt;" in t for t in mrkdwn_texts(message))
    assert not any("<!channel>" in t for t in mrkdwn_texts(message))
