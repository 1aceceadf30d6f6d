"""A rotated log's firing alert resolves as an edit of its Slack message, not a new message
(issue 13): `logwatch tail` against FakeSlack over loopback, a real rename rotation."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from logwatch.config import AlertsConfig
from logwatch.sinks.slack.notifier import Notifier
from logwatch.sinks.slack.spool import POST, UPDATE
from logwatch.testing import FakeClock, FakeSlack
from tests.support.process import Collected
from tests.support.slackhelp import PACE, ListOutbox, alert
from tests.support.tailkit import wait_until

FIRST_RUN = b"step 1 | loss 1.0\nstep 2 | loss nan\n"


class RotTail(Collected):
    """`logwatch tail 'DIR/train.log*'` with a [slack] table (no group_wait), output collected."""

    def __init__(self, folder: Path, fake: FakeSlack) -> None:
        config = folder / "logwatch.toml"
        config.write_text(
            f'[slack]\nchannel = "C0ALERTS01"\nbase_url = "{fake.base_url}"\npace = "{PACE}"\n'
            '[alerts]\ngroup_wait = "0s"\n',
            encoding="utf-8",
        )
        args = [str(folder / "train.log*"), "--format", "jsonl", "--gpu", "off"]
        args += ["--config", str(config), "--state-dir", str(folder / "state")]
        super().__init__(["tail", "--from-beginning", *args], env={"SLACK_BOT_TOKEN": fake.token})

    def events(self) -> list[tuple[str, str, str]]:
        """(rule, status, source name) of the printed alert events."""
        rows = [json.loads(line) for line in list(self.out)]
        return [(r["rule"], r["status"], Path(r["source"]).name) for r in rows]

    def __enter__(self) -> RotTail:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:  # a failed test: gone before the next one starts
            self.proc.kill()
            self.stop()


def rotate(folder: Path, tail: RotTail) -> Path:
    """`mv train.log train.log.1`, a new run's `train.log`; returns once tail has made the old
    file its own source."""
    os.rename(folder / "train.log", folder / "train.log.1")
    (folder / "train.log").write_bytes(b"step 1 | loss 2.0\n")
    wait_until(lambda: tail.said("a new file took this name"))
    return folder / "train.log.1"


def append(path: Path, data: bytes) -> None:
    """Append as a trainer would."""
    with open(path, "ab") as out:
        out.write(data)


def top_level(fake: FakeSlack) -> list[dict[str, Any]]:
    """Slack's messages that are not thread replies."""
    return [m for m in fake.posts() if m["thread_ts"] is None]


def assert_one_message_edited_to_resolved(fake: FakeSlack, tail: RotTail) -> None:
    """Once tail printed the resolve under the rotated name, Slack holds one message, edited."""
    wait_until(lambda: ("nan-loss", "resolved", "train.log.1") in tail.events())
    with contextlib.suppress(AssertionError):  # a hang bound: what never comes fails below
        wait_until(lambda: len(fake.seen("chat.postMessage")) >= 2)  # its thread reply
    [message] = top_level(fake)
    assert message["text"].startswith("✅ RESOLVED nan-loss"), message["text"]
    shown = json.dumps(message["blocks"], ensure_ascii=False)
    assert "📁 log rotated:" in shown and "train.log.1" in shown
    assert len(fake.seen("chat.postMessage")) == 2  # the message and its resolved reply


def test_a_rotated_files_alert_resolves_by_editing_its_message(tmp_path: Path) -> None:
    """NaN in train.log (one message), rename rotation, the old file recovers: still one
    top-level message, edited to RESOLVED and saying where the file went."""
    log = tmp_path / "train.log"
    log.write_bytes(FIRST_RUN)
    with FakeSlack(rate_per_s=None) as fake, RotTail(tmp_path, fake) as tail:
        wait_until(lambda: len(top_level(fake)) == 1)
        old = rotate(tmp_path, tail)
        append(old, b"step 3 | loss 0.9\n")
        assert_one_message_edited_to_resolved(fake, tail)
        assert tail.stop() == 0


def test_the_move_survives_a_restart_between_rotation_and_resolve(tmp_path: Path) -> None:
    """tail stops after the rotation and before the old file recovers; the next tail resolves
    the alert under the rotated name by editing the first message (the notify state kept it)."""
    log = tmp_path / "train.log"
    log.write_bytes(FIRST_RUN)
    with FakeSlack(rate_per_s=None) as fake:
        with RotTail(tmp_path, fake) as first:
            wait_until(lambda: len(top_level(fake)) == 1)
            old = rotate(tmp_path, first)
            assert first.stop() == 0
        with RotTail(tmp_path, fake) as second:
            wait_until(lambda: second.said("train.log.1: resuming at line"))
            append(old, b"step 3 | loss 0.9\n")
            assert_one_message_edited_to_resolved(fake, second)
            assert second.stop() == 0


def test_a_journalled_rename_is_replayed_after_a_crash(tmp_path: Path) -> None:
    """A rename the notifier took but never saved in full (kill -9 before its tick) is read
    back from the fsynced journal: the next process's resolve edits the posted message."""
    clock = FakeClock()
    settings = AlertsConfig(group_wait_s=0.0)
    outbox = ListOutbox()
    first = Notifier(outbox, channel="C1", settings=settings, clock=clock, state_dir=tmp_path)
    first.emit(alert(source="run/train.log"))
    first.tick()  # posted, and the full state saved
    first.rename_source("run/train.log", "run/train.log.1")  # journalled only: then the crash
    second = Notifier(outbox, channel="C1", settings=settings, clock=clock, state_dir=tmp_path)
    second.emit(alert(source="run/train.log.1", status="resolved", line=11, at_s=5))
    [post] = [job for job in outbox.jobs if job.kind == POST]
    [edit] = [job for job in outbox.jobs if job.kind == UPDATE]
    assert edit.parent == post.id
    assert edit.text.startswith("✅ RESOLVED nan-loss on run/train.log.1")
    assert "`run/train.log` is now `run/train.log.1`" in json.dumps(edit.blocks)
