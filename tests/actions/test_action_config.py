"""`[[action]]` in the config: what it accepts, and `file:line: what is wrong` for the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from logwatch.actions.spec import ActionSpec
from logwatch.alerts import Severity, Status
from logwatch.config import config_rules, load_config
from logwatch.errors import ConfigError

GOOD = """\
[alerts]
group_wait = "1s"

[[action]]
name = "stop-diverged-run"
on = ["nan-loss", "loss-scale-overflow"]
min_severity = "critical"
after = "2m"
run = ["scancel", "{env:SLURM_JOB_ID}"]
timeout = "30s"
max_per_hour = 2

[[action]]
name = "note"
on = ["*"]
when = "resolved"
run = ["notify-send", "{rule} on {source}", "{{literal}}"]
dry_run = true
"""


def load(tmp_path: Path, text: str) -> tuple[ActionSpec, ...]:
    path = tmp_path / "logwatch.toml"
    path.write_text(text, encoding="utf-8")
    config = load_config(path, env={})
    config_rules(config)
    return config.actions


def test_actions_are_read(tmp_path: Path) -> None:
    """Every key is read into the action, with defaults for what is left out."""
    first, second = load(tmp_path, GOOD)
    assert first == ActionSpec(
        name="stop-diverged-run",
        on=("nan-loss", "loss-scale-overflow"),
        run=("scancel", "{env:SLURM_JOB_ID}"),
        min_severity=Severity.CRITICAL,
        after_s=120.0,
        timeout_s=30.0,
        max_per_hour=2,
        line=4,
    )
    assert (second.when, second.dry_run, second.after_s, second.line) == (
        Status.RESOLVED,
        True,
        0.0,
        13,
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("run", '"scancel 1"', "'run' must be a non-empty list of strings"),
        (
            "run",
            '["kill", "{pdi}"]',
            "a: 'run': unknown placeholder {pdi} (expected one of: {rule}",
        ),
        ("run", '["kill", "{pid"]', "a lone '{' in '{pid' (write {{ for a literal brace)"),
        ("run", '["x", "{env:1BAD}"]', "'1BAD' is not an environment variable name"),
        ("when", '"fired"', "'when' must be firing or resolved, got 'fired'"),
        ("min_severity", '"fatal"', "unknown severity 'fatal'"),
        ("after", '"2 minutes"', "'after': invalid duration '2 minutes'"),
        ("max_per_hour", "0", "'max_per_hour' must be 1 or more"),
        ("timeout", '"0s"', "'timeout' must be more than 0s"),
        ("shell", "true", "unknown key 'shell' (expected one of: after, button, dry_run"),
        ("button", '"yes"', "'button' must be a bool, got 'yes'"),
    ],
)
def test_action_errors_name_file_and_line(
    tmp_path: Path, key: str, value: str, message: str
) -> None:
    """A wrong key or value is one error naming the config file, the key's line and the fix."""
    run = f"run = {value}" if key == "run" else 'run = ["kill", "{pid}"]'
    extra = "" if key == "run" else f"{key} = {value}"
    text = f'[[action]]\nname = "a"\non = ["nan-loss"]\n{run}\n{extra}\n'
    with pytest.raises(ConfigError) as err:
        load(tmp_path, text)
    line = 4 if key == "run" else 5
    assert str(err.value).startswith(f"{tmp_path / 'logwatch.toml'}:{line}: [[action]] ")
    assert message in str(err.value)


def test_unknown_rule_in_on_is_refused(tmp_path: Path) -> None:
    """An `on` rule that no loaded pack has would never run: refused at its table's line."""
    with pytest.raises(ConfigError, match=r"logwatch.toml:4: \[\[action\]\] stop-diverged-run: "):
        load(tmp_path, GOOD.replace('"loss-scale-overflow"', '"nan-los"'))


def test_a_name_used_twice_is_refused(tmp_path: Path) -> None:
    """Two actions of one name would share their journal and their cap: refused."""
    with pytest.raises(ConfigError, match="name 'note' is already used at line 4"):
        load(tmp_path, GOOD.replace('"stop-diverged-run"', '"note"'))


def test_missing_run_is_refused(tmp_path: Path) -> None:
    """An action without `run` says what to write."""
    text = GOOD.replace('run = ["scancel", "{env:SLURM_JOB_ID}"]\n', "")
    with pytest.raises(ConfigError, match=r"'run' must be a non-empty list of strings, e\.g\."):
        load(tmp_path, text)
