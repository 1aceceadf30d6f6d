"""`[[action]]` through a real `logwatch tail` process, real commands and a real trainer
stand-in: what a user relies on when logwatch is to stop a diverged run."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

from logwatch.testing import FakeSlack
from tests.actions.actionkit import (
    action_config,
    append,
    argv_toml,
    python_argv,
    recorder,
    runs,
    tail,
    trainer,
)
from tests.support.slackhelp import PACE, TOKEN
from tests.support.tailkit import wait_until

START = "2026-11-28 14:02:03,118 INFO [train] run start: run_id=slammed4 pid={pid} gpus=8\n"
NAN = "2026-11-28 14:02:05,000 INFO [train] step 2 | loss nan\n"
FINE = "2026-11-28 14:02:06,000 INFO [train] step 3 | loss 1.9\n"


def test_action_stops_the_trainer_within_after_plus_1s(tmp_path: Path) -> None:
    """`kill -TERM {pid}` with after = 1s: the trainer named by the log's `run start:` line is
    stopped, the command started no sooner than 1 s and no later than 2 s after the NaN line,
    and the stderr line says what ran and how it ended."""
    child = trainer()
    try:
        log = tmp_path / "train.log"
        log.write_text(START.format(pid=child.pid), encoding="utf-8")
        config = action_config(
            tmp_path,
            'name = "stop-diverged-run"\non = ["nan-loss"]\nafter = "1s"\n'
            + argv_toml("kill", "-TERM", "{pid}"),
        )
        proc = tail(tmp_path, config)
        written = time.time()
        append(log, NAN)
        assert child.wait(timeout=30) == -signal.SIGTERM
        wait_until(lambda: proc.said("exited 0"))
        started = _journal(tmp_path, "start")[0]["at"]
        assert 1.0 <= started - written <= 2.0
        line = next(line for line in proc.err if "exited 0" in line)
        assert line.startswith(f"action stop-diverged-run: kill -TERM {child.pid} exited 0 in ")
        assert proc.stop() == 0
    finally:
        child.kill()
        child.wait()


def test_not_run_twice_across_kill_9(tmp_path: Path) -> None:
    """An action that ran, then `kill -9` of tail, then a restart without its checkpoint (it
    announces the same alert again from the history): the command ran once for it, and once
    for a new NaN after."""
    script, record = recorder(tmp_path)
    config = action_config(
        tmp_path, f'name = "note"\non = ["nan-loss"]\n{python_argv(script, str(record))}'
    )
    log = tmp_path / "train.log"
    log.write_text(FINE, encoding="utf-8")
    first = tail(tmp_path, config)
    append(log, NAN)
    wait_until(lambda: len(runs(record)) == 1 and first.said("exited 0"))
    first.kill()
    _forget_checkpoint(tmp_path)  # the restart announces the history's alert again
    second = tail(tmp_path, config, "--from-beginning")
    append(log, FINE + NAN)  # a new NaN: a new alert, which does run
    wait_until(lambda: len(runs(record)) == 2)
    time.sleep(0.5)  # a duplicate of the first would come with it
    assert second.stop() == 0
    assert [r["env"]["LOGWATCH_LINE"] for r in runs(record)] == ["2", "4"]


def test_interrupted_run_may_have_run_and_is_not_run_again(tmp_path: Path) -> None:
    """tail killed -9 while the command runs: the restart says it may have run, and does not
    run it again."""
    script, record = recorder(tmp_path)
    config = action_config(
        tmp_path,
        f'name = "slow"\non = ["nan-loss"]\n{python_argv(script, str(record))}\ntimeout = "60s"',
    )
    log = tmp_path / "train.log"
    log.write_text(FINE, encoding="utf-8")
    first = tail(tmp_path, config, env={"RECORDER_SLEEP": "3"})  # the command's env too
    append(log, NAN)
    wait_until(lambda: len(runs(record)) == 1)
    first.kill()
    _forget_checkpoint(tmp_path)
    second = tail(tmp_path, config, "--from-beginning")
    assert second.said("action slow: may have run for the alert of line 2 (")
    assert second.said("not run again")
    time.sleep(4)  # the first command's sleep has ended: a rerun would have written by now
    assert second.stop() == 0
    assert len(runs(record)) == 1


def test_not_run_when_the_alert_resolves_inside_after(tmp_path: Path) -> None:
    """NaN, then a finite loss before `after` passed: the action is cancelled, never run."""
    script, record = recorder(tmp_path)
    config = action_config(
        tmp_path,
        f'name = "late"\non = ["nan-loss"]\nafter = "3s"\n{python_argv(script, str(record))}',
    )
    log = tmp_path / "train.log"
    log.write_text(FINE, encoding="utf-8")
    proc = tail(tmp_path, config)
    append(log, NAN + FINE)
    wait_until(lambda: proc.said("action late: cancelled: nan-loss on"))
    time.sleep(3.5)
    assert proc.stop() == 0
    assert runs(record) == []


def test_max_per_hour_caps_a_flapping_rule(tmp_path: Path) -> None:
    """NaN, recovery, three times: with max_per_hour = 2 the command runs twice and the third
    is said to be capped; `logwatch_action_runs_total` counts both outcomes."""
    script, record = recorder(tmp_path)
    config = action_config(
        tmp_path,
        f'name = "capped"\non = ["nan-loss"]\nmax_per_hour = 2\n{python_argv(script, str(record))}',
    )
    log = tmp_path / "train.log"
    log.write_text(FINE, encoding="utf-8")
    proc = tail(tmp_path, config, "--metrics-textfile", str(tmp_path))
    append(log, (NAN + FINE) * 3)
    wait_until(lambda: proc.said("max_per_hour = 2 reached"))
    wait_until(lambda: len([line for line in proc.err if "exited 0" in line]) == 2)
    assert proc.stop() == 0
    assert len(runs(record)) == 2
    prom = (tmp_path / "logwatch.prom").read_text(encoding="utf-8")
    assert 'logwatch_action_runs_total{action="capped",outcome="ok"} 2.0' in prom
    assert 'logwatch_action_runs_total{action="capped",outcome="capped"} 1.0' in prom


def test_hostile_log_text_reaches_the_command_only_as_environment(tmp_path: Path) -> None:
    """A log line holding `; rm -rf ~`, `--help` and `$(id)` fires a rule; the command gets
    exactly its configured argv, the line only in LOGWATCH_TEXT. A `{run}` of `--help` would
    read as an option: that action is skipped, saying why."""
    script, record = recorder(tmp_path)
    pack = tmp_path / "pack.toml"
    pack.write_text(
        '[[rule]]\nid = "hostile"\ntype = "match"\nseverity = "critical"\n'
        "pattern = 'EVIL'\nsummary = \"{text}\"\n",
        encoding="utf-8",
    )
    config = action_config(
        tmp_path,
        f'name = "env-only"\non = ["hostile"]\n{python_argv(script, str(record), "{rule}")}',
        f'name = "by-run"\non = ["hostile"]\n{python_argv(script, str(record), "{run}")}',
    )
    (tmp_path / "logwatch.toml").write_text(
        f'rule_packs = ["{pack.name}"]\n' + config.read_text(encoding="utf-8"), encoding="utf-8"
    )
    log = tmp_path / "train.log"
    log.write_text("run start: run_id=--help pid=1\n", encoding="utf-8")
    proc = tail(tmp_path, config)
    hostile = "EVIL ; rm -rf ~ --help $(id) `id`"
    append(log, hostile + "\n")
    wait_until(lambda: len(runs(record)) == 1 and proc.said("action by-run: not run"))
    assert proc.stop() == 0
    (run,) = runs(record)
    assert run["argv"] == ["hostile"]
    assert run["env"]["LOGWATCH_TEXT"] == hostile
    assert run["env"]["LOGWATCH_RUN"] == "--help"
    assert proc.said("'{run}' would be '--help', which reads as an option")


def _journal(folder: Path, op: str) -> list[dict[str, object]]:
    text = (folder / "state" / "actions.jsonl").read_text(encoding="utf-8")
    return [r for r in map(json.loads, text.splitlines()) if r["op"] == op]


def _forget_checkpoint(folder: Path) -> None:
    """Lose tail's own state (not the actions journal): its history is read and announced
    again."""
    for name in ("checkpoint.json", "checkpoint.delta", "emitted.log"):
        (folder / "state" / name).unlink(missing_ok=True)


def test_tail_dry_run_actions_says_and_runs_nothing(tmp_path: Path) -> None:
    """`tail --dry-run-actions`: the action is said with its argv, never run, and a later real
    run still acts (the dry run journaled nothing)."""
    script, record = recorder(tmp_path)
    config = action_config(
        tmp_path, f'name = "dry"\non = ["nan-loss"]\n{python_argv(script, str(record), "{rule}")}'
    )
    log = tmp_path / "train.log"
    log.write_text(FINE, encoding="utf-8")
    proc = tail(tmp_path, config, "--dry-run-actions")
    append(log, NAN)
    wait_until(lambda: proc.said("action dry (dry run): would run "))
    assert proc.said(f"{record} nan-loss at ")
    assert proc.stop() == 0
    assert runs(record) == []
    assert not (tmp_path / "state" / "actions.jsonl").exists()


def test_action_outcome_is_a_thread_reply_on_the_slack_message(
    tmp_path: Path, fake_slack: FakeSlack
) -> None:
    """The alert's Slack message gets a thread reply saying what the action did."""
    script, record = recorder(tmp_path)
    config = action_config(
        tmp_path, f'name = "note"\non = ["nan-loss"]\n{python_argv(script, str(record))}'
    )
    slack = (
        f'[slack]\nchannel = "C0ALERTS01"\nbase_url = "{fake_slack.base_url}"\npace = "{PACE}"\n'
    )
    config.write_text(slack + '[alerts]\ngroup_wait = "0s"\n' + config.read_text(), "utf-8")
    log = tmp_path / "train.log"
    log.write_text(FINE, encoding="utf-8")
    proc = tail(tmp_path, config, env={"SLACK_BOT_TOKEN": TOKEN})
    append(log, NAN)
    wait_until(lambda: any(m["thread_ts"] for m in fake_slack.posts()))
    assert proc.stop() == 0
    post, reply = fake_slack.posts()
    assert reply["thread_ts"] == post["ts"]
    assert reply["text"].startswith(f"action note: {sys.executable} {script} {record} exited 0")


def test_pid_is_known_after_a_restart_from_the_checkpoint(tmp_path: Path) -> None:
    """tail stops after the `run start:` line and resumes past it from its checkpoint: the NaN
    that comes then still stops the trainer the line named."""
    child = trainer()
    try:
        log = tmp_path / "train.log"
        log.write_text(START.format(pid=child.pid) + FINE, encoding="utf-8")
        config = action_config(
            tmp_path, 'name = "stop"\non = ["nan-loss"]\n' + argv_toml("kill", "-TERM", "{pid}")
        )
        assert tail(tmp_path, config).stop() == 0
        proc = tail(tmp_path, config)
        assert proc.said("resuming at line")
        append(log, NAN)
        assert child.wait(timeout=30) == -signal.SIGTERM
        assert proc.stop() == 0
    finally:
        child.kill()
        child.wait()
