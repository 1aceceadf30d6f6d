"""The parts of `[[action]]` one at a time: the journal on disk, the process runner's timeout,
placeholders, and what replay says would have run."""

from __future__ import annotations

import json
import stat
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from logwatch.actions.argv import Filled, Unfilled, fill
from logwatch.actions.journal import ActionJournal
from logwatch.actions.process import SubprocessRunner
from logwatch.actions.spec import ActionSpec
from logwatch.cli import cli
from tests.support.slackhelp import alert

SPEC = ActionSpec(name="stop", on=("nan-loss",), run=("kill", "-TERM", "{pid}"))


def test_journal_is_private_and_remembers_across_reopen(tmp_path: Path) -> None:
    """The journal is 0600; a start without a done is 'interrupted' on the next open, and every
    key it saw stays settled."""
    journal = ActionJournal(tmp_path)
    journal.start("stop/fp/2", "stop", "kill -TERM 1")
    journal.done("stop/fp/2", "stop", "ok")
    journal.start("stop/fp/9", "stop", "kill -TERM 2")  # then logwatch died
    journal.close()
    assert stat.S_IMODE((tmp_path / "actions.jsonl").stat().st_mode) == 0o600
    again = ActionJournal(tmp_path)
    assert [run.key for run in again.interrupted] == ["stop/fp/9"]
    assert again.settled("stop/fp/2") and again.settled("stop/fp/9")
    assert again.runs_within_hour("stop") == 2
    again.close()
    third = ActionJournal(tmp_path)
    assert third.interrupted == []  # said once, marked done
    third.close()


def test_damaged_journal_records_are_set_aside_and_said(tmp_path: Path) -> None:
    """A record of the wrong shape is kept aside byte for byte, said once with its line, and
    the good records still count."""
    journal = ActionJournal(tmp_path)
    journal.start("stop/fp/2", "stop", "kill -TERM 1")
    journal.done("stop/fp/2", "stop", "ok")
    journal.close()
    with open(tmp_path / "actions.jsonl", "a", encoding="utf-8") as out:
        out.write('{"op": "start", "key": 5, "action": "stop"}\n{"op": "don\n')
    said: list[str] = []
    again = ActionJournal(tmp_path, report=said.append)
    assert again.settled("stop/fp/2")
    assert (
        len(said) == 1
        and ":3: not an action record (action record 'start': 'key': must be a string" in said[0]
    )
    aside = list(tmp_path.glob("actions.jsonl.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text(encoding="utf-8").count("\n") == 2
    again.close()


def test_timeout_sends_sigterm_then_sigkill(tmp_path: Path) -> None:
    """A command that ignores SIGTERM is killed after the grace period; the result says it
    timed out."""
    ignore = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    runner = SubprocessRunner(kill_after_term_s=0.5)
    started = time.monotonic()
    result = runner.run([sys.executable, "-c", ignore], {}, timeout_s=0.5)
    assert result.timed_out and result.exit_code == -9
    assert time.monotonic() - started < 30  # not the command's 60 s


def test_a_missing_command_is_said_not_raised() -> None:
    """A command that is not installed gives a result with the reason, no exception."""
    result = SubprocessRunner().run(["/nonexistent/scancel", "1"], {}, timeout_s=5)
    assert result.exit_code is None and "No such file" in result.error


def test_placeholders_fill_one_element_each() -> None:
    """A value with spaces and quotes stays one element; a missing pid says why."""
    event = alert(source="run dir/it's.log")
    spec = ActionSpec(name="n", on=("*",), run=("echo", "{source}", "{rule}:{line}"))
    assert fill(spec, event, None, {}) == Filled(
        ("echo", "run dir/it's.log", "nan-loss:10"),
        fill(spec, event, None, {}).env,  # type: ignore[union-attr]
    )
    missing = fill(SPEC, event, None, {})
    assert isinstance(missing, Unfilled)
    assert missing.reason == (
        "{pid} has no value: no `run start:` line with pid= in run dir/it's.log so far"
    )


def test_replay_actions_dry_run_says_what_and_when(tmp_path: Path) -> None:
    """`replay --actions dry-run`: the NaN that recovered inside `after` is cancelled, the one
    still firing would have run `kill -TERM <the run start's pid>` `after` later in log time;
    `--format json` has the same as `action` rows. Nothing runs."""
    log = tmp_path / "train.log"
    log.write_text(
        "2026-11-28 14:02:03,118 INFO [train] run start: run_id=r1 pid=4242 gpus=8\n"
        "2026-11-28 14:02:05,000 INFO [train] step 2 | loss nan\n"
        "2026-11-28 14:02:06,000 INFO [train] step 3 | loss 1.9\n"
        "2026-11-28 14:02:10,000 INFO [train] step 4 | loss nan\n",
        encoding="utf-8",
    )
    config = tmp_path / "logwatch.toml"
    config.write_text(
        '[[action]]\nname = "stop"\non = ["nan-loss"]\nafter = "2s"\n'
        'run = ["kill", "-TERM", "{pid}"]\n',
        encoding="utf-8",
    )
    args = ["replay", str(log), "--config", str(config), "--actions", "dry-run"]
    text = CliRunner().invoke(cli, args)
    assert text.exit_code == 0, text.output
    assert f"action stop: cancelled: nan-loss on {log}:2 resolved inside after=2s" in text.output
    assert (
        f"action stop (dry run): would run kill -TERM 4242 at 2026-11-28 14:02:12 "
        f"for nan-loss on {log}:4" in text.output
    )
    doc = json.loads(CliRunner().invoke(cli, [*args, "--format", "json"]).output)
    assert [(row["type"], row["outcome"], row["line"]) for row in doc["actions"]] == [
        ("action", "cancelled", 2),
        ("action", "dry_run", 4),
    ]


def test_replay_actions_without_actions_is_a_usage_error(tmp_path: Path) -> None:
    """`--actions dry-run` with a config that has no [[action]] says so (exit 2)."""
    log = tmp_path / "train.log"
    log.write_text("step 1 | loss 1.0\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["replay", str(log), "--actions", "dry-run"])
    assert result.exit_code == 2
    assert "has no [[action]] table" in result.output


def test_an_unusable_journal_stops_tail_with_one_line(tmp_path: Path) -> None:
    """The actions journal cannot be opened (a folder in its place): tail exits 2 saying why
    and what to fix, before following anything (an action it cannot journal never runs)."""
    (tmp_path / "train.log").write_text("", encoding="utf-8")
    config = tmp_path / "logwatch.toml"
    config.write_text('[[action]]\nname = "a"\non = ["*"]\nrun = ["true"]\n', encoding="utf-8")
    state = tmp_path / "state"
    (state / "actions.jsonl").mkdir(parents=True)
    state.chmod(0o700)
    args = ["tail", str(tmp_path / "train.log"), "--gpu", "off", "--config", str(config)]
    result = CliRunner().invoke(cli, [*args, "--state-dir", str(state)])
    assert result.exit_code == 2
    assert f"{state / 'actions.jsonl'}: cannot open the actions journal (" in result.output
    assert "Fix: permissions or free space in the state directory" in result.output


def test_doctor_checks_each_action_can_start(tmp_path: Path) -> None:
    """`logwatch doctor`: a program not on PATH fails (exit 1) with the fix; one found says
    where; a `{env:NAME}` not set here is a warning."""
    config = tmp_path / "logwatch.toml"
    config.write_text(
        '[gpu]\nmode = "off"\n'
        '[[action]]\nname = "cancel"\non = ["nan-loss"]\nrun = ["scancel-not-here", "1"]\n'
        '[[action]]\nname = "stop"\non = ["nan-loss"]\nrun = ["kill", "{env:LW_TEST_UNSET}"]\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(cli, ["doctor", "--config", str(config)])
    assert result.exit_code == 1
    assert (
        "FAIL action cancel: 'scancel-not-here': not found on PATH — fix: install it, or give "
        "its full path as the first element of 'run'\n"
    ) in result.output
    assert "ok   action stop: 'kill' is " in result.output
    assert "warn action stop: $LW_TEST_UNSET is not set here" in result.output


def test_report_lists_what_actions_would_have_done(tmp_path: Path) -> None:
    """`logwatch report` with a config that has [[action]]: an `action` row per outcome, in a
    table that says nothing was run; without [[action]], no such table."""
    log = tmp_path / "train.log"
    log.write_text(
        "2026-11-28 14:02:03,118 INFO [train] run start: run_id=r1 pid=4242 gpus=8\n"
        "2026-11-28 14:02:05,000 INFO [train] step 2 | loss nan\n",
        encoding="utf-8",
    )
    config = tmp_path / "logwatch.toml"
    config.write_text(
        '[[action]]\nname = "stop"\non = ["nan-loss"]\nrun = ["kill", "-TERM", "{pid}"]\n',
        encoding="utf-8",
    )
    out = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["report", str(log), "--config", str(config), "-o", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    assert "<h2>Actions (dry run: nothing was run)</h2>" in html
    assert '<tr class="action dry_run"><td>2026-11-28 14:02:05</td><td>stop</td>' in html
    assert "would run kill -TERM 4242 at 2026-11-28 14:02:05" in html
    config.write_text("", encoding="utf-8")
    again = CliRunner().invoke(cli, ["report", str(log), "--config", str(config), "-o", str(out)])
    assert again.exit_code == 0, again.output
    assert "<h2>Actions" not in out.read_text(encoding="utf-8")
