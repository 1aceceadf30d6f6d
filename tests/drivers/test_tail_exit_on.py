"""`logwatch tail --exit-on`: exit 3 once a matching alert fired and every sink took it."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.testing import FakeSlack
from tests.support.process import Collected
from tests.support.slackhelp import PACE, TOKEN
from tests.support.tailkit import wait_until


def tail(folder: Path, *extra: str, config: Path | None = None) -> Collected:
    """`logwatch tail folder/*.log` (built-in rules, jsonl) in a subprocess."""
    args = ["tail", str(folder / "*.log"), "--format", "jsonl", "--gpu", "off"]
    args += ["--state-dir", str(folder / "state"), *extra]
    if config is not None:
        args += ["--config", str(config)]
    proc = Collected(args, env={"SLACK_BOT_TOKEN": TOKEN})
    wait_until(lambda: proc.said("following it"))
    return proc


def append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(text)


def test_exit_on_critical_exits_3_after_printing_the_alert(tmp_path: Path) -> None:
    """A warning does not end `--exit-on critical`; the NaN (critical) does: it is printed on
    stdout and the process exits 3 by itself."""
    log = tmp_path / "train.log"
    log.write_text("step 1 | loss 2.0\n", encoding="utf-8")
    proc = tail(tmp_path, "--exit-on", "critical")
    append(log, "step 2 | loss nan\n")
    code = proc.proc.wait(timeout=30)
    assert code == 3
    assert proc.stop() == 3
    rules = [json.loads(line)["rule"] for line in proc.out]
    assert "nan-loss" in rules


def test_exit_on_rule_id_ignores_other_alerts(tmp_path: Path) -> None:
    """`--exit-on RULE`: an alert of another rule, even critical, does not end it."""
    log = tmp_path / "train.log"
    log.write_text("step 1 | loss 2.0\n", encoding="utf-8")
    proc = tail(tmp_path, "--exit-on", "no-such-alert-yet", "--rules", str(_pack(tmp_path)))
    append(log, "step 2 | loss nan\n")
    wait_until(lambda: any("nan-loss" in line for line in proc.out))
    assert proc.proc.poll() is None  # still following
    append(log, "stop here please\n")
    assert proc.proc.wait(timeout=30) == 3
    proc.stop()


def _pack(folder: Path) -> Path:
    pack = folder / "pack.toml"
    pack.write_text(
        '[[rule]]\nid = "no-such-alert-yet"\ntype = "match"\nseverity = "info"\n'
        "pattern = 'stop here'\nsummary = \"asked to stop\"\n",
        encoding="utf-8",
    )
    return pack


def test_a_signal_keeps_its_own_status(tmp_path: Path) -> None:
    """SIGTERM before any matching alert exits 0, never 3: a stop is not an alert."""
    (tmp_path / "train.log").write_text("step 1 | loss 2.0\n", encoding="utf-8")
    proc = tail(tmp_path, "--exit-on", "critical")
    assert proc.stop(signal.SIGTERM) == 0


def test_exit_on_waits_for_slack(tmp_path: Path) -> None:
    """With a Slack group held back for an hour, `--exit-on` still posts the alert before it
    exits 3: the exit means every sink took it."""
    with FakeSlack(token=TOKEN, rate_per_s=None) as fake:
        config = tmp_path / "logwatch.toml"
        config.write_text(
            f'[slack]\nchannel = "C0ALERTS01"\nbase_url = "{fake.base_url}"\npace = "{PACE}"\n'
            '[alerts]\ngroup_wait = "1h"\n',
            encoding="utf-8",
        )
        log = tmp_path / "train.log"
        log.write_text("step 1 | loss 2.0\n", encoding="utf-8")
        proc = tail(tmp_path, "--exit-on", "nan-loss", config=config)
        append(log, "step 2 | loss nan\n")
        assert proc.proc.wait(timeout=30) == 3
        proc.stop()
        assert any("nan-loss" in str(post["blocks"]) for post in fake.posts())


def test_exit_on_unknown_value_is_a_usage_error(tmp_path: Path) -> None:
    """A value that is neither a severity nor a loaded rule is refused at start, naming both."""
    (tmp_path / "train.log").write_text("", encoding="utf-8")
    args = ["tail", str(tmp_path / "train.log"), "--gpu", "off"]
    args += ["--state-dir", str(tmp_path / "s"), "--exit-on", "critcal"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "'critcal' is neither a severity (info, warning, critical) nor a loaded rule id" in (
        result.output
    )


def test_replay_help_shows_fail_on_default() -> None:
    """`replay --help` says what --fail-on does when it is not given."""
    result = CliRunner().invoke(cli, ["replay", "--help"])
    assert "[default: never]" in " ".join(result.output.split())
