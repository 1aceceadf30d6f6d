"""Slack buttons inside one process: the Socket Mode link (acks, a lost connection said once,
alerting going on without it), group membership, Acknowledge and Silence until resolved in
the lifecycle, and the `[slack]` keys that turn buttons on."""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from logwatch.buttons_config import ButtonsConfig
from logwatch.config import AlertsConfig, Config, load_config
from logwatch.errors import ConfigError
from logwatch.sinks.slack.buttons import (
    ACKNOWLEDGE,
    SILENCE_1H,
    SILENCE_RESOLVED,
    ButtonDesk,
    controls,
)
from logwatch.sinks.slack.notifier import Notifier
from logwatch.sinks.slack.silences import SilenceStore
from logwatch.sinks.slack.sink import SlackSink, open_slack_sink
from logwatch.sinks.slack.spool import REPLY
from logwatch.testing import FakeClock, FakeSlack
from tests.support.slackhelp import ListOutbox, alert, slack_config
from tests.support.tailkit import wait_until

ALLOWED = "U0ALLOWED1"


def _open(fake: FakeSlack, tmp_path: Path, said: list[str], **buttons: Any) -> SlackSink:
    base = slack_config(fake, group_wait_s=0.0)
    settings = {"app_token": fake.app_token, "allowed_users": (ALLOWED,), **buttons}
    slack = dataclasses.replace(base.slack, buttons=ButtonsConfig(**settings))
    config = Config(slack=slack, alerts=AlertsConfig(group_wait_s=0.0))
    return open_slack_sink(
        config, tmp_path / "state", report=said.append, tick_s=0.0, ping_interval_s=1.0
    )


def _fire(sink: SlackSink, fake: FakeSlack, rule: str) -> dict[str, Any]:
    """Emit a firing alert, tick: its posted message."""
    sink.emit(alert(rule))
    sink.tick(sink.notifier.clock.now())
    wait_until(lambda: any(m["text"].find(rule) >= 0 for m in fake.posts()))
    return next(m for m in fake.posts() if rule in m["text"])


def _value(message: dict[str, Any]) -> str:
    (actions,) = [b for b in message["blocks"] if b["type"] == "actions"]
    return str(actions["elements"][0]["value"])


def test_presses_are_acked_and_a_lost_connection_is_said_once(tmp_path: Path) -> None:
    """Every envelope gets its envelope_id ack; with Slack's Socket Mode side down, the loss is
    said once (not once per retry), alerts still reach Slack, and once it is back the link
    reconnects by itself (said once) and presses act again."""
    said: list[str] = []
    with FakeSlack(rate_per_s=None) as fake:
        sink = _open(fake, tmp_path, said)
        try:
            first = _fire(sink, fake, "nan-loss")
            assert fake.socket.wait_connected()
            fake.socket.refused = True
            fake.socket.drop()
            wait_until(lambda: any("lost the Socket Mode connection" in s for s in said), 40)
            second = _fire(sink, fake, "loss-spike")  # alerting does not wait for the link
            assert _value(second)
            time.sleep(4)  # several reconnection attempts fail meanwhile
            assert len([s for s in said if "Socket Mode" in s]) == 1
            fake.socket.refused = False
            assert fake.socket.wait_connected(count=2, timeout_s=40)
            wait_until(lambda: any("connected again" in s for s in said))
            envelope = fake.socket.press(
                ACKNOWLEDGE,
                _value(first),
                user=ALLOWED,
                channel="C0ALERTS01",
                message_ts=first["ts"],
            )
            assert fake.socket.wait_ack(envelope)
            wait_until(lambda: "Acknowledged by" in json.dumps(first["blocks"]))
        finally:
            sink.close()
    assert len([s for s in said if "Socket Mode" in s]) == 2


def test_a_group_member_may_press_others_may_not(tmp_path: Path) -> None:
    """allowed_groups: a member of the user group (usergroups.users.list) silences; a user in no
    allowed group gets the ephemeral answer and nothing is stored."""
    said: list[str] = []
    with FakeSlack(rate_per_s=None, groups={"S0ONCALL1": ["U0ONCALL1"]}) as fake:
        sink = _open(fake, tmp_path, said, allowed_users=(), allowed_groups=("S0ONCALL1",))
        try:
            message = _fire(sink, fake, "nan-loss")
            assert fake.socket.wait_connected()
            for user in ("U0OUTSIDE", "U0ONCALL1"):
                envelope = fake.socket.press(
                    SILENCE_1H,
                    _value(message),
                    user=user,
                    channel="C0ALERTS01",
                    message_ts=message["ts"],
                )
                assert fake.socket.wait_ack(envelope)
            wait_until(lambda: "<@U0ONCALL1>" in json.dumps(message["blocks"]))
        finally:
            sink.close()
    assert [e["user"] for e in fake.ephemerals] == ["U0OUTSIDE"]
    (stored,) = SilenceStore(tmp_path / "state").all()
    assert stored.author == "slack:U0ONCALL1"
    assert any("U0OUTSIDE, who is not in [slack] allowed_users" in s for s in said)


class _Web:
    """What the desk asks of the Web API, recorded."""

    def __init__(self) -> None:
        self.ephemerals: list[dict[str, str]] = []

    def chat_postEphemeral(self, **kwargs: str) -> None:
        self.ephemerals.append(kwargs)


def _desk(tmp_path: Path) -> tuple[Notifier, ButtonDesk, ListOutbox, FakeClock]:
    import threading

    clock, outbox = FakeClock(), ListOutbox()
    notifier = Notifier(
        outbox,
        channel="C0ALERTS01",
        settings=AlertsConfig(group_wait_s=0.0, repeat_interval_s=600.0),
        clock=clock,
        silences=SilenceStore(tmp_path),
        controls=controls([]),
    )
    desk = ButtonDesk(ButtonsConfig("xapp-1", (ALLOWED,)), notifier, threading.Lock(), _Web())
    return notifier, desk, outbox, clock


def _payload(action_id: str, value: str, user: str = ALLOWED) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": {"id": user},
        "channel": {"id": "C0ALERTS01"},
        "actions": [{"action_id": action_id, "value": value, "text": {"text": "b"}}],
    }


def test_acknowledge_ends_the_reminders(tmp_path: Path) -> None:
    """Two groups fire for longer than repeat_interval: the unacknowledged one gets its "still
    firing" reply, the acknowledged one none (its message says who acknowledged it)."""
    notifier, desk, outbox, clock = _desk(tmp_path)
    notifier.emit(alert("nan-loss", "a.log"))
    notifier.emit(alert("loss-spike", "b.log", line=99))
    acked, other = list(notifier.posted)
    desk.handle(_payload(ACKNOWLEDGE, acked))
    clock.advance(601)
    notifier.tick()
    replies = [j for j in outbox.jobs if j.kind == REPLY]
    assert [j.parent for j in replies] == [other]
    assert f"Acknowledged by <@{ALLOWED}>" in json.dumps(outbox.jobs[-2].blocks)


def test_silence_until_resolved_ends_when_the_alert_resolves(tmp_path: Path) -> None:
    """The button's silence mutes its alert with no end of its own, and ends the moment the
    group resolves, so the next episode is told again."""
    notifier, desk, outbox, clock = _desk(tmp_path)
    notifier.emit(alert("nan-loss"))
    (notice,) = notifier.posted
    desk.handle(_payload(SILENCE_RESOLVED, notice))
    store = SilenceStore(tmp_path)
    assert store.muting("nan-loss", "run/train.log", clock.now() + timedelta(days=30))
    assert "Silenced until it resolves" in json.dumps(outbox.jobs[-1].blocks)
    notifier.emit(alert("nan-loss", status="resolved", line=20))
    assert store.muting("nan-loss", "run/train.log", clock.now()) is None


def test_a_press_on_a_resolved_alert_is_answered(tmp_path: Path) -> None:
    """A press on a message whose alerts resolved meanwhile stores nothing and says so to the
    one who pressed."""
    _, desk, _, _ = _desk(tmp_path)
    desk.handle(_payload(SILENCE_1H, "gone"))
    assert SilenceStore(tmp_path).all() == []
    assert "no longer firing" in desk.web.ephemerals[0]["text"]


SLACK = '[slack]\nchannel = "C1"\n'


@pytest.mark.parametrize(
    ("extra", "token", "message"),
    [
        ('app_token_file = "app"\n', "xapp-1-A-1-s3cret", ":3: [slack] app_token_file turns on"),
        (
            'app_token_file = "app"\nallowed_users = ["U0A1"]\n',
            "xoxb-s3cret",
            "must hold an app-level token",
        ),
        ('allowed_users = ["U0A1"]\n', "", "there are no buttons without [slack] app_token_file"),
        (
            'app_token_file = "app"\nallowed_users = ["bob"]\n',
            "xapp-1",
            "allowed_users' must be a list of IDs",
        ),
    ],
)
def test_button_keys_are_checked(tmp_path: Path, extra: str, token: str, message: str) -> None:
    """Each mistake is one `file:line:` error; a wrong token is never echoed."""
    (tmp_path / "app").write_text(token, encoding="utf-8")
    path = tmp_path / "logwatch.toml"
    path.write_text(SLACK + extra, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, {"SLACK_BOT_TOKEN": "xoxb-bot"})
    assert message in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_buttons_are_read_and_kept_out_of_repr(tmp_path: Path) -> None:
    """app_token_file with allowed users and groups: read, the token never in repr."""
    (tmp_path / "app").write_text("xapp-1-A-1-s3cret\n", encoding="utf-8")
    path = tmp_path / "logwatch.toml"
    extra = 'app_token_file = "app"\nallowed_users = ["U0A1"]\nallowed_groups = ["S0B2"]\n'
    path.write_text(SLACK + extra, encoding="utf-8")
    config = load_config(path, {"SLACK_BOT_TOKEN": "xoxb-bot"})
    assert config.slack is not None and config.slack.buttons is not None
    assert config.slack.buttons.app_token == "xapp-1-A-1-s3cret"
    assert (config.slack.buttons.allowed_users, config.slack.buttons.allowed_groups) == (
        ("U0A1",),
        ("S0B2",),
    )
    assert "s3cret" not in repr(config)


def test_stop_run_only_where_a_button_action_matches() -> None:
    """A `button = true` action on nan-loss: its Stop run button (danger, with Slack's confirm
    dialog) is on a nan-loss message, not on a loss-spike one, whose message keeps the other
    three."""
    from logwatch.actions.spec import ActionSpec
    from logwatch.sinks.slack.notices import Notice

    spec = ActionSpec("stop", ("nan-loss",), ("kill", "{pid}"), button=True)
    build = controls([spec])
    for rule, expected in (("nan-loss", 4), ("loss-spike", 3)):
        event = alert(rule)
        notice = Notice("n1", rule, event.severity, 0.0, {event.fingerprint: event})
        (block,) = build(notice)
        assert len(block["elements"]) == expected
    stop = build(Notice("n1", "nan-loss", event.severity, 0.0, {"x": alert()}))[0]
    button = stop["elements"][-1]
    assert button["action_id"] == "logwatch.stop:stop" and button["style"] == "danger"
    assert button["confirm"]["confirm"]["text"] == "Stop run"


def test_doctor_checks_the_app_token_and_the_groups_scope() -> None:
    """doctor with buttons: the app token opens a Socket Mode URL (ok), a wrong one fails with
    the fix; allowed_groups without usergroups:read is a warning (not a failure)."""
    from logwatch.sinks.slack.checks import slack_checks

    with FakeSlack() as fake:
        slack = slack_config(fake).slack
        good = ButtonsConfig(fake.app_token, (ALLOWED,), ("S0ONCALL1",))
        checks = {c.name: c for c in slack_checks(dataclasses.replace(slack, buttons=good))}
        bad = dataclasses.replace(slack, buttons=ButtonsConfig("xapp-wrong", (ALLOWED,)))
        wrong = {c.name: c for c in slack_checks(bad)}
    assert checks["slack buttons"].ok
    assert not checks["slack groups"].ok and not checks["slack groups"].required
    assert (wrong["slack buttons"].ok, wrong["slack buttons"].detail) == (
        False,
        "apps.connections.open: invalid_auth",
    )
    assert "connections:write" in wrong["slack buttons"].fix


def test_without_an_app_token_messages_have_no_buttons(tmp_path: Path) -> None:
    """No app_token_file: the same message as before buttons existed (no actions block) and no
    Socket Mode connection is ever opened."""
    with FakeSlack(rate_per_s=None) as fake:
        config = slack_config(fake, group_wait_s=0.0)
        sink = open_slack_sink(config, tmp_path / "state", tick_s=0.0)
        try:
            message = _fire(sink, fake, "nan-loss")
        finally:
            sink.close()
        assert sink.link is None and fake.seen("apps.connections.open") == []
    assert [b["type"] for b in message["blocks"]].count("actions") == 0
