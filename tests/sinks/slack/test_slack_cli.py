"""Slack at the CLI: replay --notify, doctor, and secrets kept out of --verbose output."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.testing import FakeSlack, Fault
from tests.support.paths import NAN_LOG

TOKEN = "plain-bot-token-SECRET-7781"


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN, rate_per_s=None, not_member=("C0OTHER002",)) as server:
        yield server


def config(tmp_path: Path, fake: FakeSlack, channel: str = "C0ALERTS01") -> str:
    path = tmp_path / "logwatch.toml"
    path.write_text(
        f'[slack]\nchannel = "{channel}"\nbase_url = "{fake.base_url}"\ntimeout = "2s"\n'
    )
    return str(path)


def invoke(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_replay_posts_nothing_without_notify(tmp_path: Path, fake: FakeSlack) -> None:
    """Replay never talks to Slack unless asked."""
    code, _, _ = invoke(
        "replay", "--config", config(tmp_path, fake), NAN_LOG, env={"SLACK_BOT_TOKEN": TOKEN}
    )
    assert code == 0 and fake.requests == []


def test_replay_notify_posts_one_digest(tmp_path: Path, fake: FakeSlack) -> None:
    """replay --notify posts exactly one digest message listing the rules that fired."""
    code, out, _ = invoke(
        "replay",
        "--notify",
        "--config",
        config(tmp_path, fake),
        "--state-dir",
        str(tmp_path / "state"),
        NAN_LOG,
        env={"SLACK_BOT_TOKEN": TOKEN},
    )
    assert code == 0 and "nan-loss" in out
    (message,) = fake.posts()
    assert message["text"].startswith("logwatch replay:") and "nan-loss" in message["text"]


@pytest.mark.parametrize("mode", ["bot", "webhook"])
def test_verbose_output_never_shows_secrets(tmp_path: Path, fake: FakeSlack, mode: str) -> None:
    """--verbose shows slack-sdk's request logs with the token and webhook URL redacted."""
    env = {"SLACK_BOT_TOKEN": TOKEN} if mode == "bot" else {"SLACK_WEBHOOK_URL": fake.webhook_url}
    code, out, err = invoke(
        "replay",
        "--notify",
        "--verbose",
        "--config",
        config(tmp_path, fake),
        "--state-dir",
        str(tmp_path / "s"),
        NAN_LOG,
        env=env,
    )
    assert code == 0 and len(fake.posts()) == 1
    assert "Sending a request" in err
    if mode == "webhook":  # slack-sdk logs the webhook URL itself; the redacting filter masks it
        assert "Sending a request - url: [REDACTED]," in err
    for secret in (TOKEN, "fakewebhooksecret0000"):
        assert secret not in err and secret not in out


def test_doctor_all_good(tmp_path: Path, fake: FakeSlack) -> None:
    """doctor prints one line per check and exits 0 when every required check passes (NVML is optional)."""
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=1.0\n")
    code, out, _ = invoke(
        "doctor",
        "--config",
        config(tmp_path, fake),
        str(tmp_path / "*.log"),
        env={"SLACK_BOT_TOKEN": TOKEN},
    )
    lines = out.splitlines()
    assert code == 0, out
    assert [line.split(":")[0] for line in lines] == [
        "ok   config",
        "ok   rule packs",
        "ok   slack token",
        "ok   slack channel",
        "ok   slack scopes",
        lines[5].split(":")[0],
        f"ok   glob {tmp_path}/*.log",
    ]
    assert lines[5].startswith(("ok   nvml", "warn nvml"))


def test_doctor_failures_say_how_to_fix(tmp_path: Path, fake: FakeSlack) -> None:
    """A channel the bot is not in and a glob matching nothing fail with a fix each; exit 1."""
    code, out, _ = invoke(
        "doctor",
        "--config",
        config(tmp_path, fake, "C0OTHER002"),
        str(tmp_path / "nope*.log"),
        env={"SLACK_BOT_TOKEN": TOKEN},
    )
    assert code == 1
    assert "FAIL slack channel: C0OTHER002: the bot is not a member — fix: invite the bot" in out
    assert f"FAIL glob {tmp_path}/nope*.log: matches no file — fix: " in out


def test_doctor_warns_without_history_scope(tmp_path: Path) -> None:
    """A token without channels:history gets a warning naming the scopes to add; it still exits 0."""
    with FakeSlack(token=TOKEN, rate_per_s=None, scopes=("chat:write",)) as fake:
        code, out, _ = invoke(
            "doctor", "--config", config(tmp_path, fake), env={"SLACK_BOT_TOKEN": TOKEN}
        )
    assert code == 0, out
    (line,) = [line for line in out.splitlines() if "slack scopes" in line]
    assert line.startswith("warn slack scopes: no channels:history")
    assert "fix: add the channels:history and groups:history scopes" in line


def test_doctor_bad_token(tmp_path: Path, fake: FakeSlack) -> None:
    """A token Slack rejects fails the token check (auth.test) without printing the token."""
    code, out, _ = invoke(
        "doctor", "--config", config(tmp_path, fake), env={"SLACK_BOT_TOKEN": "wrong-token-XYZ123"}
    )
    assert code == 1 and "FAIL slack token: auth.test: invalid_auth — fix:" in out
    assert "wrong-token-XYZ123" not in out


def test_doctor_reports_nvml_error_class(tmp_path: Path) -> None:
    """Without an NVIDIA library, doctor's NVML line names the pynvml error class and a fix (exit 0: optional)."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    probe = "import pynvml\ntry:\n    pynvml.nvmlInit()\nexcept Exception:\n    raise SystemExit(1)"
    if subprocess.run([sys.executable, "-c", probe], env=env).returncode == 0:
        pytest.skip("this machine has a real NVML library")
    result = subprocess.run(
        [sys.executable, "-m", "logwatch.cli", "doctor"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    (line,) = [x for x in result.stdout.splitlines() if "nvml" in x]
    assert result.returncode == 0
    assert line.startswith("warn nvml: no NVIDIA driver library (libnvidia-ml.so.1) on this host")
    assert "NVMLError_LibraryNotFound" in line
    assert "— fix: run on a host with the NVIDIA driver installed" in line


@pytest.mark.parametrize("second", ["# the bot token for #alerts", "second-token-XYZ-0042"])
def test_two_line_token_file_never_shows_the_token(
    tmp_path: Path, fake: FakeSlack, second: str
) -> None:
    """A token file with a second line: the first is used, said once, and no retry prints it."""
    (tmp_path / "token").write_text(f"\n{TOKEN}\n{second}\n")
    path = tmp_path / "logwatch.toml"
    path.write_text(
        f'[slack]\nchannel = "C0ALERTS01"\nbase_url = "{fake.base_url}"\n'
        'timeout = "2s"\ntoken_file = "token"\n'
    )
    fake.fail("chat.postMessage", Fault(500), Fault(503, body="<html>busy</html>"))
    args = ["replay", "--notify", "--config", str(path), "--state-dir", str(tmp_path / "s")]
    result = CliRunner().invoke(cli, [*args, NAN_LOG], env={"SLACK_BOT_TOKEN": None})
    assert result.exit_code == 0 and len(fake.posts()) == 1
    assert len(fake.seen("chat.postMessage")) == 3
    said = f"token_file {tmp_path / 'token'}: 2 lines; using the first"
    assert result.stderr.count(said) == 1
    for secret in (TOKEN, second):
        assert secret not in result.stderr and secret not in result.stdout


def test_token_file_with_a_bad_token_never_shows_it(tmp_path: Path, fake: FakeSlack) -> None:
    """invalid_auth for a two-line token file's token: dead-lettered, token never on stderr."""
    wrong = "wrong-bot-credential-5521"
    (tmp_path / "token").write_text(f"{wrong}\n{wrong}-2\n")
    path = tmp_path / "logwatch.toml"
    path.write_text(
        f'[slack]\nchannel = "C0ALERTS01"\nbase_url = "{fake.base_url}"\ntoken_file = "token"\n'
    )
    args = ["replay", "--notify", "-v", "--config", str(path), "--state-dir", str(tmp_path / "s")]
    result = CliRunner().invoke(cli, [*args, NAN_LOG], env={"SLACK_BOT_TOKEN": None})
    assert "invalid_auth" in result.stderr
    assert wrong not in result.stderr and wrong not in result.stdout
