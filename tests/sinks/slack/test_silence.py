"""`logwatch silence add|list|expire` through the CLI, stored in the state directory."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.sinks.slack.silences import SilenceStore


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_add_list_expire(tmp_path: Path) -> None:
    """A silence is added with an id, listed while active, and gone from the list once expired."""
    state = str(tmp_path)
    code, out = run(
        "silence",
        "add",
        "nan-loss",
        "--source",
        "runs/r3/*",
        "--for",
        "2h",
        "--comment",
        "known bad batch",
        "--state-dir",
        state,
    )
    assert code == 0
    silence_id = re.match(r"^([0-9a-f]{8})  silenced nan-loss on runs/r3/\* until ", out).group(1)  # type: ignore[union-attr]
    code, out = run("silence", "list", "--state-dir", state)
    assert (
        code == 0
        and out.startswith(f"{silence_id}  active   nan-loss  runs/r3/*  until ")
        and out.rstrip().endswith("known bad batch")
    )
    store = SilenceStore(tmp_path)
    assert store.muting("nan-loss", "runs/r3/train.log", datetime.now()) is not None
    assert store.muting("nan-loss", "runs/r4/train.log", datetime.now()) is None
    code, out = run("silence", "expire", silence_id, "--state-dir", state)
    assert (code, out) == (0, f"{silence_id}  expired (nan-loss on runs/r3/*)\n")
    assert run("silence", "list", "--state-dir", state) == (0, "no active silences\n")
    assert store.muting("nan-loss", "runs/r3/train.log", datetime.now()) is None


def test_bad_duration_and_unknown_id(tmp_path: Path) -> None:
    """A malformed --for is a usage error; expiring an unknown id says which ids exist."""
    code, out = run(
        "silence",
        "add",
        "nan-loss",
        "--for",
        "2 hours",
        "--comment",
        "x",
        "--state-dir",
        str(tmp_path),
    )
    assert code == 2 and "invalid duration '2 hours'" in out
    code, out = run("silence", "expire", "deadbeef", "--state-dir", str(tmp_path))
    assert code == 2 and "no silence with id 'deadbeef'" in out


def test_default_state_dir_from_xdg(tmp_path: Path) -> None:
    """Without --state-dir, silences live in $XDG_STATE_HOME/logwatch."""
    result = CliRunner().invoke(
        cli,
        ["silence", "add", "gpu-*", "--for", "1h", "--comment", "maint"],
        env={"XDG_STATE_HOME": str(tmp_path)},
    )
    assert result.exit_code == 0
    assert (tmp_path / "logwatch" / "silences.json").is_file()


def test_a_state_dir_that_is_a_file_is_one_line_exit_2(tmp_path: Path) -> None:
    """--state-dir naming a regular file: list and add say so in one line, no traceback."""
    not_a_dir = tmp_path / "f"
    not_a_dir.write_text("x")
    code, out = run("silence", "list", "--state-dir", str(not_a_dir))
    assert (code, out) == (
        2,
        f"Error: cannot read silences in {not_a_dir} (not a directory); "
        "give --state-dir a directory you can read (or none for the default)\n",
    )
    code, out = run(
        "silence", "add", "nan-loss", "--for", "1h", "--comment", "c", "--state-dir", str(not_a_dir)
    )
    assert code == 2 and out.startswith(f"Error: cannot write silences in {not_a_dir} (")
    assert out.count("\n") == 1


def test_a_state_dir_that_cannot_be_created_is_one_line_exit_2() -> None:
    """--state-dir under /proc (cannot be created): exit 2 naming the folder and the fix."""
    code, out = run(
        "silence", "add", "nan-loss", "--for", "1h", "--comment", "c", "--state-dir", "/proc/ro"
    )
    assert code == 2 and out.startswith("Error: cannot write silences in /proc/ro (/proc/ro: ")
    assert out.endswith("give --state-dir a directory you can write (or none for the default)\n")


def test_a_rule_that_matches_no_loaded_rule_is_refused(tmp_path: Path) -> None:
    """A typo (`nan_loss`) silences nothing: exit 2 listing the known rule ids, nothing stored."""
    code, out = run(
        "silence", "add", "nan_loss", "--for", "1h", "--comment", "c", "--state-dir", str(tmp_path)
    )
    assert code == 2
    assert out.startswith("Error: no rule matches 'nan_loss' (known: bucket-starvation, ")
    assert "nan-loss" in out and out.count("\n") == 1
    assert SilenceStore(tmp_path).all() == []


def test_a_rule_from_the_configs_packs_can_be_silenced(tmp_path: Path) -> None:
    """Rule ids of the config's own packs (and globs over them) are accepted with --config."""
    (tmp_path / "mine.toml").write_text(
        '[[rule]]\nid = "my-rule"\ntype = "match"\nseverity = "warning"\n'
        'summary = "x"\npattern = "boom"\n'
    )
    config = tmp_path / "logwatch.toml"
    config.write_text('rule_packs = ["mine.toml"]\n')
    args = ("--for", "1h", "--comment", "c", "--state-dir", str(tmp_path / "s"))
    code, out = run("silence", "add", "my-*", *args)
    assert code == 2 and "no rule matches 'my-*'" in out
    code, out = run("silence", "add", "my-*", *args, "--config", str(config))
    assert code == 0 and " silenced my-* on * until " in out
