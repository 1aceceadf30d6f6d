"""What `logwatch tail` says on stderr when it starts: files, rules, state, sinks, GPUs."""

from __future__ import annotations

import signal
from dataclasses import replace
from pathlib import Path

from logwatch.config import Config, SlackConfig
from logwatch.drivers.startup import rules_phrase, sinks_line
from logwatch.rules.loader import builtin_rules_dir, load_rules
from tests.drivers.test_tail_cli import Tailer
from tests.support.tailkit import wait_until


def block(tailer: Tailer) -> list[str]:
    """The stderr lines printed so far."""
    return [line.rstrip("\n") for line in list(tailer.err)]


def test_the_startup_block_names_files_rules_state_sinks_and_gpus(tmp_path: Path) -> None:
    """The first stderr lines say what is watched, which rules, where state is, where alerts go
    and the GPU side's status."""
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.log").write_bytes(b"hello\n")
    tailer = Tailer(tmp_path)
    try:
        wait_until(lambda: any("GPUs:" in line for line in block(tailer)))
    finally:
        tailer.finish(signal.SIGTERM)
    lines = block(tailer)
    pattern = str(tmp_path / "*.log")
    assert lines[0] == (
        f"logwatch: watching '{pattern}' (3 files: {tmp_path}/a.log, {tmp_path}/b.log, +1)"
    )
    assert lines[1] == (
        f"logwatch: 1 rule from 1 pack ({tmp_path}/pack.toml); state in {tmp_path / 'state'}"
    )
    assert lines[2] == "logwatch: alerts to the terminal"
    assert lines[3] == "logwatch: GPUs: off (--gpu off or [gpu] mode)"


def test_the_block_says_when_nothing_matches_yet(tmp_path: Path) -> None:
    """A glob that matches nothing yet is reported as such in the first line."""
    tailer = Tailer(tmp_path)
    try:
        wait_until(lambda: any("GPUs:" in line for line in block(tailer)))
    finally:
        tailer.finish(signal.SIGTERM)
    assert block(tailer)[0] == f"logwatch: watching '{tmp_path / '*.log'}' (no files yet)"


def test_the_sinks_line_names_the_slack_channel_and_mode() -> None:
    """With a [slack] table the sinks line names the channel (bot) or says webhook."""
    bot = SlackConfig(channel="C0123", base_url="https://slack.invalid/", token="xoxb-secret")
    hook = SlackConfig(
        channel="webhook", base_url="https://slack.invalid/", webhook_url="https://h"
    )
    assert sinks_line(Config(slack=bot)) == "alerts to the terminal, Slack #C0123 (bot)"
    assert sinks_line(Config(slack=hook)) == "alerts to the terminal, Slack (webhook)"
    assert "xoxb" not in sinks_line(Config(slack=bot))


def test_the_rules_line_tells_a_pack_beside_the_builtin_folder_from_a_builtin_one() -> None:
    """A pack in a folder whose name only starts like the built-in packs' folder (`rules-mine/`
    beside a checkout's `rules/`) is named as the user's own, not counted as built-in."""
    builtin = load_rules([builtin_rules_dir()])[0]
    mine = builtin_rules_dir().with_name(builtin_rules_dir().name + "-mine") / "mine.toml"
    own = replace(builtin, id="mine", origin=f"{mine}:3")
    assert rules_phrase([builtin, own]) == f"2 rules from 2 packs (built-in, {mine})"
