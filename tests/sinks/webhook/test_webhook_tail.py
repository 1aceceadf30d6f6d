"""`[[webhook]]` through a real `logwatch tail`: Alertmanager's webhook payload, through an outage
and a restart, nothing lost and nothing twice; URL and headers never shown or stored."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from logwatch.config import load_config
from logwatch.errors import ConfigError
from logwatch.testing.webhook import WebhookReceiver
from tests.support.process import Collected
from tests.support.tailkit import wait_until

NAN = "step 2 | loss nan\n"
FINE = "step 3 | loss 1.9\n"
SECRET = "Bearer hook-secret-4c1d"


def configure(folder: Path, receiver: WebhookReceiver) -> Path:
    """A config whose webhook URL and Authorization header live in files beside it."""
    (folder / "hook.url").write_text(receiver.url + "\n", encoding="utf-8")
    (folder / "hook.headers").write_text(f"Authorization: {SECRET}\n", encoding="utf-8")
    config = folder / "logwatch.toml"
    config.write_text(
        '[[webhook]]\nurl_file = "hook.url"\nheaders_file = "hook.headers"\ntimeout = "10s"\n',
        encoding="utf-8",
    )
    return config


def tail(folder: Path, config: Path) -> Collected:
    args = ["tail", str(folder / "*.log"), "--gpu", "off", "--config", str(config)]
    proc = Collected([*args, "--state-dir", str(folder / "state"), "--poll-interval", "0.2s"])
    try:  # a start takes seconds of a loaded machine (6 at once at load 28: over 20 s)
        wait_until(lambda: proc.said("following it") or proc.said("(checkpoint)"), timeout_s=60)
    except AssertionError:
        proc.stop()  # not left running into the next test
        raise AssertionError(f"tail did not start; it said: {proc.err}") from None
    return proc


def append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(text)


def test_alert_and_resolve_post_alertmanager_payloads(tmp_path: Path) -> None:
    """A NaN and its recovery reach the receiver as two version-4 payloads with the
    Alertmanager fields, the configured header sent; neither URL nor header is said or kept."""
    with WebhookReceiver() as receiver:
        config = configure(tmp_path, receiver)
        log = tmp_path / "train.log"
        log.write_text("step 1 | loss 2.0\n", encoding="utf-8")
        proc = tail(tmp_path, config)
        assert proc.said("alerts to the terminal, 1 webhook")
        append(log, NAN + FINE)
        # the firing and its resolve are two posts however they wait: on a loaded machine the
        # resolve was often queued before the firing's post began, and the two were folded
        # into one resolved post (tests/sinks/webhook/test_webhook_outbox.py pins it)
        try:  # a loaded machine: the two posts may wait for each other's retries
            wait_until(lambda: len(receiver.bodies()) == 2, timeout_s=60)
        except AssertionError:
            proc.stop()  # not left running into the next test
            posts = [(b["status"], [a["status"] for a in b["alerts"]]) for b in receiver.bodies()]
            raise AssertionError(f"posts {posts}; tail said: {proc.err}") from None
        assert proc.stop() == 0
        firing, resolved = receiver.bodies()
        assert (firing["version"], firing["status"], resolved["status"]) == (
            "4",
            "firing",
            "resolved",
        )
        (alert,) = firing["alerts"]
        assert alert["labels"]["alertname"] == "nan-loss"
        assert alert["labels"]["source"] == str(log)
        assert alert["annotations"]["summary"].startswith("loss is nan at step 2")
        assert alert["endsAt"] == "0001-01-01T00:00:00Z"
        (ended,) = resolved["alerts"]
        assert ended["startsAt"] == alert["startsAt"] and ended["endsAt"] != alert["endsAt"]
        assert ended["fingerprint"] == alert["fingerprint"]
        assert firing["groupLabels"] == {"alertname": "nan-loss"}
        assert receiver.received[0].headers["Authorization"] == SECRET
        said = "".join(proc.out + proc.err)
        kept = "".join(p.read_text(errors="replace") for p in (tmp_path / "state").iterdir())
        for secret in (receiver.url, f"127.0.0.1:{receiver.port}", SECRET):
            assert secret not in said and secret not in kept


def test_outage_then_recovery_delivers_once(tmp_path: Path) -> None:
    """The receiver answers 503: the failure is said once, retried with backoff; once it
    answers 200 the alert arrives, once."""
    with WebhookReceiver() as receiver:
        config = configure(tmp_path, receiver)
        log = tmp_path / "train.log"
        log.write_text("", encoding="utf-8")
        proc = tail(tmp_path, config)
        receiver.status = 503
        append(log, NAN)
        wait_until(lambda: proc.said("webhook 1: cannot deliver (HTTP 503"))
        receiver.status = 200
        wait_until(lambda: len(receiver.bodies()) == 1, timeout_s=30)
        wait_until(lambda: proc.said("webhook 1: delivering again"))
        time.sleep(0.5)  # a duplicate would come right behind
        assert proc.stop() == 0
        assert len(receiver.bodies()) == 1
        assert sum("cannot deliver" in line for line in proc.err) == 1


def test_restart_while_down_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    """The receiver is not listening when the NaN comes; tail stops with it spooled; the next
    tail, once the receiver is back, posts it; a third posts nothing again."""
    receiver = WebhookReceiver()
    try:
        config = configure(tmp_path, receiver)
        log = tmp_path / "train.log"
        log.write_text("", encoding="utf-8")
        receiver.stop()
        first = tail(tmp_path, config)
        append(log, NAN)
        wait_until(lambda: first.said("webhook 1: cannot deliver ("))
        assert first.stop() == 0
        receiver.start()
        second = tail(tmp_path, config)
        wait_until(lambda: len(receiver.bodies()) == 1, timeout_s=30)
        assert second.stop() == 0
        third = tail(tmp_path, config)
        time.sleep(1.0)
        assert third.stop() == 0
        assert [b["alerts"][0]["labels"]["alertname"] for b in receiver.bodies()] == ["nan-loss"]
    finally:
        receiver.stop()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('url = "https://h/x"\nurl_file = "f"', "needs exactly one of 'url' or 'url_file'"),
        ('url = "ftp://secret-host/x"', "the URL must be http:// or https:// with a host"),
        ('url = "https://h/x"\nretries = 3', "unknown key 'retries'"),
        ('url = "https://h/x"\ntimeout = "0s"', "'timeout' must be more than 0s"),
    ],
)
def test_webhook_config_errors(tmp_path: Path, table: str, message: str) -> None:
    """A wrong [[webhook]] is one `file:line:` error; a URL is never echoed."""
    config = tmp_path / "logwatch.toml"
    config.write_text(f"[[webhook]]\n{table}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(config, env={})
    assert str(err.value).startswith(f"{config}:")
    assert message in str(err.value)
    assert "secret-host" not in str(err.value)
