"""Slack buttons through a real `logwatch tail` process: real slack-sdk Socket Mode client against
FakeSlack's loopback WebSocket, real silences file, a real trainer stand-in stopped by the
Stop run button."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from logwatch.sinks.slack.buttons import ACKNOWLEDGE, SILENCE_1H, STOP
from logwatch.testing import FakeSlack
from tests.actions.actionkit import append, argv_toml, tail, trainer
from tests.support.slackhelp import PACE
from tests.support.tailkit import wait_until

START = "2026-11-28 14:02:03,118 INFO [train] run start: run_id=slammed4 pid={pid} gpus=8\n"
NAN = "2026-11-28 14:02:05,000 INFO [train] step 2 | loss nan\n"
ALLOWED, INTRUDER = "U0ALLOWED1", "U0INTRUDER"


def _config(folder: Path, fake: FakeSlack) -> Path:
    (folder / "app-token").write_text(fake.app_token + "\n", encoding="utf-8")
    config = folder / "logwatch.toml"
    config.write_text(
        f'[slack]\nchannel = "C0ALERTS01"\nbase_url = "{fake.base_url}"\ntimeout = "2s"\n'
        f'pace = "{PACE}"\napp_token_file = "app-token"\nallowed_users = ["{ALLOWED}"]\n'
        '[alerts]\ngroup_wait = "0s"\n'
        '[[action]]\nname = "stop-diverged-run"\non = ["nan-loss"]\nafter = "1h"\n'
        f"button = true\n{argv_toml('kill', '-TERM', '{pid}')}\n",
        encoding="utf-8",
    )
    return config


def _alert_message(fake: FakeSlack) -> dict[str, Any] | None:
    return next((m for m in fake.posts() if not m["thread_ts"]), None)


def _buttons(message: dict[str, Any]) -> dict[str, str]:
    """action_id -> value of the message's buttons."""
    return {
        element["action_id"]: element["value"]
        for block in message["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    }


def _shown(message: dict[str, Any]) -> str:
    return json.dumps(message["blocks"], ensure_ascii=False)


def test_tail_acts_on_button_presses_and_refuses_strangers(tmp_path: Path) -> None:
    """The alert message has Silence 1h, Silence until resolved, Acknowledge and (from the
    `button = true` action) Stop run; every envelope is acknowledged; a stranger's press gets an
    ephemeral "not allowed", is said on stderr and changes nothing; the allowed user's presses
    store a silence (author = the Slack user), mark the message with who did what, and Stop run
    kills the trainer (its action waited for `after = 1h`: the button ran it now, once)."""
    child = trainer()
    with FakeSlack(rate_per_s=None) as fake:
        try:
            log = tmp_path / "train.log"
            log.write_text(START.format(pid=child.pid), encoding="utf-8")
            proc = tail(tmp_path, _config(tmp_path, fake), env={"SLACK_BOT_TOKEN": fake.token})
            append(log, NAN)
            wait_until(lambda: _alert_message(fake) is not None)
            message = _alert_message(fake)
            assert message is not None
            buttons = _buttons(message)
            stop = STOP + "stop-diverged-run"
            assert set(buttons) == {SILENCE_1H, "logwatch.silence_resolved", ACKNOWLEDGE, stop}
            notice = buttons[SILENCE_1H]
            assert fake.socket.wait_connected()

            def press(action_id: str, user: str) -> None:
                envelope = fake.socket.press(
                    action_id, notice, user=user, channel="C0ALERTS01", message_ts=message["ts"]
                )
                assert fake.socket.wait_ack(envelope)

            press(SILENCE_1H, INTRUDER)
            wait_until(lambda: any(e["user"] == INTRUDER for e in fake.ephemerals))
            assert "not allowed" in fake.ephemerals[0]["text"]
            wait_until(
                lambda: proc.said(f"pressed by {INTRUDER}, who is not in [slack] allowed_users")
            )
            press(stop, INTRUDER)
            wait_until(lambda: len(fake.ephemerals) == 2)
            assert child.poll() is None
            assert not (tmp_path / "state" / "silences.json").exists()
            assert not message["edits"]

            press(SILENCE_1H, ALLOWED)
            silences = tmp_path / "state" / "silences.json"
            wait_until(lambda: "Silenced until" in _shown(message))
            (stored,) = json.loads(silences.read_text(encoding="utf-8"))
            assert (stored["rule"], stored["author"]) == ("nan-loss", f"slack:{ALLOWED}")
            assert f"<@{ALLOWED}>" in _shown(message)

            press(ACKNOWLEDGE, ALLOWED)
            wait_until(lambda: f"Acknowledged by <@{ALLOWED}>" in _shown(message))

            press(stop, ALLOWED)
            assert child.wait(timeout=30) == -signal.SIGTERM
            wait_until(lambda: "exited 0 in" in _shown(message))
            assert f"pressed by <@{ALLOWED}>" in _shown(message)
            assert proc.said(f"action stop-diverged-run: kill -TERM {child.pid} exited 0")
            press(stop, ALLOWED)  # at most once: the second press is answered, nothing runs
            wait_until(lambda: any("already ran" in e["text"] for e in fake.ephemerals))
            assert proc.stop() == 0
            assert proc.said("(bot, buttons)")  # the startup block says buttons are on
            kept = [p.read_bytes() for p in (tmp_path / "state").rglob("*") if p.is_file()]
            for text in [*(line.encode() for line in proc.err), *kept]:
                assert fake.app_token.encode() not in text
        finally:
            child.kill()
            child.wait()
