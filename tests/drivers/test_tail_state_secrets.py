"""A URL password in a log line never reaches the state directory: checkpoint, its delta, the
emitted-alert journal, the Slack spool and notify state, alertmanager.json all hold log text only
after the masking the sinks apply (`logwatch.redact`)."""

from __future__ import annotations

import signal
from pathlib import Path

from logwatch.testing import FakeSlack
from logwatch.testing.slack import Fault
from tests.support.process import Collected
from tests.support.slackhelp import TOKEN
from tests.support.tailkit import wait_until

SECRETS = ("hunter2pw", "s3cretpw", "t0psecret", "sekrit99", "g1napw", "lab3lpw")
LOG = "".join(
    line + "\n"
    for line in (
        # a run id that is a URL with a password (the engine keeps it, alerts carry it)
        "run start: run_id=https://bob:hunter2pw@git.example.com/x.git",
        "step=1 loss=2.5 cloning https://alice:s3cretpw@github.com/org/repo.git",
        "step=2 loss=nan fetching https://erin:sekrit99@data.example.com/a",
        # what the classify rules keep of the last line of a batch
        "NCCL WARN remote https://gina:g1napw@host.example.com/x",
        # a custom rule's label captured from the line
        "dataset remote https://lab:lab3lpw@hub.example.com/ds.git failed",
        "RuntimeError: failed to fetch https://dave:t0psecret@data.example.com/ds.tar",
    )
)
PACK = """
[[rule]]
id = "dataset-remote"
type = "match"
severity = "warning"
pattern = 'dataset remote (?P<remote>\\S+) failed'
summary = "dataset {labels.remote} failed"
"""


def test_no_state_file_holds_a_url_password(tmp_path: Path, fake_slack: FakeSlack) -> None:
    """With Slack refusing (jobs stay in the spool) and Alertmanager unreachable (alerts stay
    in alertmanager.json), every file under the state directory is free of the passwords the
    log's URLs carried, and so is what tail printed."""
    fake_slack.fail("chat.postMessage", *[Fault(status=503)] * 50)
    (tmp_path / "train.log").write_text(LOG, encoding="utf-8")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "pack.toml").write_text(PACK, encoding="utf-8")
    config = tmp_path / "logwatch.toml"
    config.write_text(
        f'[slack]\nchannel = "C0ALERTS01"\nbase_url = "{fake_slack.base_url}"\ntimeout = "2s"\n'
        '[alerts]\ngroup_wait = "0s"\n'
        '[alertmanager]\nurls = ["http://127.0.0.1:9"]\ntimeout = "1s"\n',
        encoding="utf-8",
    )
    state = tmp_path / "state"
    args = [str(tmp_path / "*.log"), "--from-beginning", "--format", "jsonl", "--gpu", "off"]
    args += ["--config", str(config), "--state-dir", str(state), "--rules", str(tmp_path / "rules")]
    tail = Collected(["tail", *args], env={"SLACK_BOT_TOKEN": TOKEN})
    try:
        wait_until(lambda: len(tail.out) >= 2, timeout_s=60)
        wait_until(lambda: (state / "checkpoint.json").exists(), timeout_s=60)
        wait_until(lambda: (state / "alertmanager.json").exists(), timeout_s=60)
        wait_until(lambda: bool(fake_slack.seen("chat.postMessage")), timeout_s=60)
    finally:
        tail.stop(signal.SIGKILL)  # no clean stop: the journal and delta stay as they were
    files = [path for path in state.rglob("*") if path.is_file()]
    names = {path.name for path in files}
    assert {"checkpoint.json", "emitted.log", "alertmanager.json"} <= names
    assert any(name.startswith("slack") for name in names), names
    held = {path.name: path.read_bytes() for path in files}
    assert b"[REDACTED]" in held["checkpoint.json"]  # the run id and the kept line are there
    for name, data in held.items():
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret} in {name}"
    for line in tail.out + tail.err:
        assert not any(secret in line for secret in SECRETS), line
