"""Where the config comes from: --config, $LOGWATCH_CONFIG, ./logwatch.toml, XDG config home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from logwatch.config import find_config
from tests.support.paths import ROOT

SLACK = '[slack]\nchannel = "{channel}"\ntoken_file = "{token}"\n'


def write_config(path: Path, channel: str) -> Path:
    """A config whose Slack channel names it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    token = path.parent / "token"
    token.write_text("xoxb-not-a-real-token\n", encoding="utf-8")
    token.chmod(0o600)
    path.write_text(SLACK.format(channel=channel, token=token), encoding="utf-8")
    return path


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A config at each discoverable place, with the working directory and env pointed at them."""
    cwd, xdg = tmp_path / "cwd", tmp_path / "xdg"
    found = {
        "given": write_config(tmp_path / "given.toml", "CGIVEN"),
        "env": write_config(tmp_path / "env.toml", "CENV"),
        "cwd": write_config(cwd / "logwatch.toml", "CCWD"),
        "xdg": write_config(xdg / "logwatch" / "config.toml", "CXDG"),
    }
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("LOGWATCH_CONFIG", str(found["env"]))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    return found


def test_the_option_wins(places: dict[str, Path]) -> None:
    """--config is used over every other place."""
    assert find_config(str(places["given"])) == places["given"]


def test_the_environment_comes_second(places: dict[str, Path]) -> None:
    """Without --config, $LOGWATCH_CONFIG is used over ./logwatch.toml."""
    assert find_config(None) == places["env"]


def test_the_working_directory_comes_third(
    places: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --config and $LOGWATCH_CONFIG, ./logwatch.toml is used over the XDG one."""
    monkeypatch.delenv("LOGWATCH_CONFIG")
    assert find_config(None) == Path("logwatch.toml")


def test_the_xdg_config_home_comes_last(
    places: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing nearer, $XDG_CONFIG_HOME/logwatch/config.toml is used."""
    monkeypatch.delenv("LOGWATCH_CONFIG")
    places["cwd"].unlink()
    assert find_config(None) == places["xdg"]


def test_xdg_defaults_to_dot_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without $XDG_CONFIG_HOME, ~/.config/logwatch/config.toml is used; none at all: no config."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOGWATCH_CONFIG", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert find_config(None) is None
    home = write_config(tmp_path / "home" / ".config" / "logwatch" / "config.toml", "CHOME")
    assert find_config(None) == home


def test_a_missing_env_config_is_an_error(tmp_path: Path) -> None:
    """$LOGWATCH_CONFIG naming a missing file fails naming it (not silently skipped)."""
    env = {**os.environ, "LOGWATCH_CONFIG": str(tmp_path / "nope.toml")}
    done = subprocess.run(
        [sys.executable, "-m", "logwatch.cli", "rules", "list"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "nope.toml" in done.stderr


def test_the_cli_reads_the_xdg_config(places: dict[str, Path]) -> None:
    """`logwatch doctor` (a process) reports the config found under $XDG_CONFIG_HOME."""
    env = {k: v for k, v in os.environ.items() if k != "LOGWATCH_CONFIG"}
    env["PYTHONPATH"] = str(ROOT)
    places["cwd"].unlink()
    done = subprocess.run(
        [sys.executable, "-m", "logwatch.cli", "doctor"],
        cwd=places["cwd"].parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert str(places["xdg"]) in done.stdout + done.stderr
