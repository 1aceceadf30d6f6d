"""Text output never passes a terminal control from a log line or a file name to the terminal."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.cli.errors import status_line
from logwatch.redact import stderr_line, visible

# ESC, BEL, BS, CR, DEL, the C1 block and bidi overrides: none may reach the terminal raw.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
HOSTILE = "\x1b]52;c;ZXZpbA==\x07 \x1b[2J \x1bc \x1bP+q\x1b\\ \x08\x08 \x9b31m \x1b]8;;http://x\x07"


def test_replay_text_mode_prints_no_control_from_log_or_file_name(write_log) -> None:  # type: ignore[no-untyped-def]
    """OSC 52/0/8, ESC c, DCS, CSI, C1 and backspaces from a log line and its name print escaped."""
    data = (
        f"step 1 loss 2.0\nstep 2 {HOSTILE} loss nan\nstep 3 loss 2.0\n".encode()
        + b"step 4 \xc2\x9b2J \x1b]0;pwned\x07 loss nan\n"
    )
    path = write_log(data, name="run\x1b]0;title\x07.log")
    result = CliRunner().invoke(cli, ["replay", path])
    assert result.exit_code == 0 and "nan-loss" in result.stdout
    for line in result.stdout.splitlines():
        assert not CONTROL.search(line), repr(line)
    assert "run\\x1b]0;title\\x07.log" in result.stdout


def test_jsonl_keeps_the_text_but_escapes_every_control(write_log) -> None:  # type: ignore[no-untyped-def]
    """JSONL stays exact JSON (the controls survive json.loads) with no raw control byte in it."""
    path = write_log(f"step 2 {HOSTILE} loss nan\n".encode())
    result = CliRunner().invoke(cli, ["replay", path, "--format", "jsonl"])
    assert result.exit_code == 0 and result.stdout
    for line in result.stdout.splitlines():
        assert not CONTROL.search(line), repr(line)
        assert "\x9b31m" in json.loads(line)["text"] or json.loads(line)["status"] == "resolved"


def test_status_line_escapes_file_names(capsys: pytest.CaptureFixture[str]) -> None:
    """A stderr status line naming a hostile file shows its controls as \\xNN."""
    status_line("following logs/a\x1b]0;x\x07\x9b.log")
    err = capsys.readouterr().err
    assert err == "logwatch: following logs/a\\x1b]0;x\\x07\\x9b.log\n"


def test_visible_keeps_tabs_and_printable_text() -> None:
    """Tabs and ordinary (non-ASCII too) text pass; controls become \\xNN, bidi overrides \\uNNNN."""
    assert visible("a\tb é 步 ✓") == "a\tb é 步 ✓"
    assert visible("x\x1b[2Jy\r\n\u202e") == "x\\x1b[2Jy\\x0d\\x0a\\u202e"


def test_background_reports_escape_controls_in_file_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What the watcher, the spool and the Slack workers say on stderr (`stderr_line`) names
    the user's files with their controls escaped, as the status lines do."""
    stderr_line(f"logwatch: cannot watch /runs/{HOSTILE}/train.log (Permission denied)")
    err = capsys.readouterr().err
    assert not CONTROL.search(err.rstrip("\n")) and "\\x1b]52;c;" in err


def test_a_rule_pack_in_a_hostile_folder_is_named_escaped(tmp_path: Path) -> None:
    """`rule ... replaces the built-in rule at ...` names the pack's path with its controls
    escaped; so does the refusal of a pack that takes a built-in id without `replace = true`."""
    folder = tmp_path / "pack\x1b]0;pwned\x07"
    folder.mkdir()
    pack = folder / "mine.toml"
    pack.write_text(
        '[[rule]]\nid = "nan-loss"\ntype = "nonfinite"\nseverity = "warning"\ncolumn = "loss"\n'
        'summary = "mine"\n'
    )
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.0\n")
    result = CliRunner().invoke(cli, ["replay", str(log), "--rules", str(pack)])
    assert result.exit_code == 2 and "is already taken by the built-in rule" in result.stderr
    assert "pack\\x1b]0;pwned\\x07" in result.stderr
    assert not CONTROL.search(result.stderr.replace("\n", ""))
    pack.write_text(pack.read_text() + "replace = true\n")
    result = CliRunner().invoke(cli, ["replay", str(log), "--rules", str(pack)])
    assert result.exit_code == 0, result.output
    assert "replaces the built-in rule at" in result.stderr
    assert "pack\\x1b]0;pwned\\x07" in result.stderr
    assert not CONTROL.search(result.stderr.replace("\n", ""))
