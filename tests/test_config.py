"""The config file: what it accepts, and `file:line: what is wrong` for what it does not."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.config import config_rules, default_state_dir, load_config
from logwatch.errors import ConfigError

TOKEN = "xoxb-1111-2222-abcdefSECRET"
HOOK = "https://hooks.slack.com/services/T000/B000/XYZsecretXYZ"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "logwatch.toml"
    path.write_text(text, encoding="utf-8")
    return path


FULL = """\
rule_packs = []

[slack]
channel = "C0ALERTS01"
base_url = "https://slack.example/api"
timeout = "5s"
pace = "250ms"

[rules.nan-grad]
enabled = false

[rules.cuda-oom]
severity = "warning"

[alerts]
group_wait = "15s"
repeat_interval = "30m"
inhibit = [["nvml-disabled", "gpu-metrics-missing"], ["gpu-lost", "nccl-timeout"]]

[gpu]
mode = "required"
interval = "2s"
"""


def test_full_config_is_read(tmp_path: Path) -> None:
    """Every table is parsed into typed settings; env provides the token."""
    config = load_config(write(tmp_path, FULL), {"SLACK_BOT_TOKEN": TOKEN})
    assert config.slack is not None
    assert (config.slack.channel, config.slack.base_url, config.slack.timeout_s) == (
        "C0ALERTS01",
        "https://slack.example/api/",
        5.0,
    )
    assert config.slack.pace_s == 0.25
    assert config.slack.mode == "bot" and TOKEN not in repr(config)
    assert (config.alerts.group_wait_s, config.alerts.repeat_interval_s) == (15.0, 1800.0)
    assert config.alerts.inhibit[1] == ("gpu-lost", "nccl-timeout")
    assert (config.gpu.mode, config.gpu.interval_s) == ("required", 2.0)


def test_rule_overrides_apply(tmp_path: Path) -> None:
    """[rules.<id>] turns rules off and overrides their parameters by name."""
    config = load_config(write(tmp_path, FULL), {"SLACK_BOT_TOKEN": TOKEN})
    specs = {s.id: s for s in config_rules(config)}
    assert "nan-grad" not in specs and specs["cuda-oom"].severity.label == "warning"


def test_env_selects_webhook_mode_and_overrides_base_url(tmp_path: Path) -> None:
    """SLACK_WEBHOOK_URL selects webhook mode; LOGWATCH_SLACK_BASE_URL overrides base_url."""
    env = {"SLACK_WEBHOOK_URL": HOOK, "LOGWATCH_SLACK_BASE_URL": "http://127.0.0.1:9/api"}
    config = load_config(write(tmp_path, FULL), env)
    assert config.slack is not None and config.slack.mode == "webhook"
    assert config.slack.base_url == "http://127.0.0.1:9/api/"


def test_token_file_is_read_relative_to_config(tmp_path: Path) -> None:
    """[slack] token_file is read (relative to the config file) when SLACK_BOT_TOKEN is unset."""
    (tmp_path / "token").write_text(TOKEN + "\n")
    config = load_config(write(tmp_path, '[slack]\nchannel = "C1"\ntoken_file = "token"\n'), {})
    assert config.slack is not None and config.slack.token == TOKEN


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        (
            '[slack]\nchannel = "C1"\nchanel = "x"\n',
            {"SLACK_BOT_TOKEN": TOKEN},
            ":3: unknown key 'chanel' in [slack]",
        ),
        (
            "[slack]\nchannel = 5\n",
            {"SLACK_BOT_TOKEN": TOKEN},
            ":2: 'channel' must be a string, got 5",
        ),
        ('\n[slack]\nchannel = "C1"\n', {}, ":2: [slack] is configured but there is no token"),
        (
            '[alerts]\ngroup_wait = "10 seconds"\n',
            {},
            ":2: 'group_wait': invalid duration '10 seconds'",
        ),
        (
            '[alerts]\ninhibit = [["a"]]\n',
            {},
            ":2: 'inhibit' must be a list of [source-rule, target-rule] pairs",
        ),
        ('[gpu]\nmode = "maybe"\n', {}, ":2: 'mode' must be one of auto, required, off"),
        ("x = 1\n", {}, ":1: unknown key 'x' in the top level"),
        ('[rules.nan-loss]\nenabled = "no"\n', {}, ":2: 'enabled' must be true or false"),
        ('[rules.nan-loss]\nstall_after = "2 min"\n', {}, ":2: 'stall_after': invalid duration"),
        ("[slack\n", {}, ":1: invalid TOML"),
        ('[alerts]\n\nrepeat_interval = "0s"\n', {}, ":3: 'repeat_interval' must be more than 0s"),
        ('[alerts]\ngroup_wait = "-1s"\n', {}, ":2: 'group_wait': invalid duration '-1s'"),
        (
            '[slack]\nchannel = "C1"\npace = "fast"\n',
            {"SLACK_BOT_TOKEN": TOKEN},
            ":3: 'pace': invalid duration 'fast'",
        ),
        (
            'builtin_rules = true\nrule_packs = ["nope.toml"]\n',
            {},
            ":2: rule pack 'nope.toml' not found (looked for ",
        ),
        ('[slack]\nchannel = "C1"\ntoken_file = "nope"\n', {}, ":3: token_file"),
    ],
)
def test_config_errors_name_file_and_line(
    tmp_path: Path, text: str, env: dict[str, str], expected: str
) -> None:
    """Each mistake is reported as `file:line: what is wrong`."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path, env)
    assert str(info.value).startswith(f"{path}{expected}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\n[rules.nan-lost]\nenabled = false\n", ":2: unknown rule 'nan-lost'"),
        (
            "[rules.nan-loss]\n\ncolumn = 3\n",
            ":3: 'column' of rule 'nan-loss' must be a string, got 3",
        ),
        ("[rules.nan-loss]\nenabled = true\ncolumn = 'lr2'\n", ":3: with the [rules] overrides:"),
        (
            '[alerts]\ngroup_wait = "1s"\ninhibit = [["nan-loss", "nope"]]\n',
            ":3: [alerts] inhibit names unknown rule 'nope' (loaded rules: ",
        ),
        (
            "[rules.nan-loss]\npattern = 'x'\n",
            ":2: unknown parameter 'pattern' for rule 'nan-loss'",
        ),
    ],
)
def test_rule_override_errors(tmp_path: Path, text: str, expected: str) -> None:
    """Overrides naming a missing rule or parameter, or of the wrong type, fail with the config's file:line."""
    config = load_config(write(tmp_path, text), {})
    with pytest.raises(ConfigError) as info:
        config_rules(config)
    assert str(config.path) in str(info.value) and expected in str(info.value)


def test_cli_exits_2_with_config_error_and_no_secret(tmp_path: Path) -> None:
    """At the CLI a broken config is one `Error: file:line: ...` line, exit 2, with secrets redacted."""
    path = write(tmp_path, f'[slack]\nchannel = "C1"\nbase_url = ["{HOOK}"]\n')
    log = tmp_path / "t.log"
    log.write_text("step=1 loss=1.0\n")
    result = CliRunner().invoke(
        cli, ["replay", "--config", str(path), str(log)], env={"SLACK_BOT_TOKEN": TOKEN}
    )
    assert result.exit_code == 2
    assert f"Error: {path}:3: 'base_url' must be a string" in result.output
    assert "XYZsecretXYZ" not in result.output and TOKEN not in result.output


def test_default_state_dir_follows_xdg() -> None:
    """The state directory is $XDG_STATE_HOME/logwatch, else ~/.local/state/logwatch."""
    assert default_state_dir({"XDG_STATE_HOME": "/x/state"}) == Path("/x/state/logwatch")
    assert default_state_dir({}).parts[-3:] == (".local", "state", "logwatch")


@pytest.mark.parametrize(
    "value", [HOOK, "https://example.com/hook?key=abc123secret", "MY-HOOK", "1HOOK"]
)
def test_webhook_url_env_must_name_a_variable_and_is_not_echoed(tmp_path: Path, value: str) -> None:
    """A URL (or any non-variable name) in webhook_url_env is refused without showing it."""
    path = write(tmp_path, f'[slack]\nchannel = "C0ALERTS01"\nwebhook_url_env = "{value}"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, {"SLACK_BOT_TOKEN": TOKEN})
    message = str(caught.value)
    assert message.startswith(f"{path}:3: 'webhook_url_env' must name an environment variable")
    assert value not in message and "[REDACTED]" not in message
    (tmp_path / "a.log").write_text("step 1 | loss 2.0\n")
    result = CliRunner().invoke(cli, ["replay", str(tmp_path / "a.log"), "--config", str(path)])
    assert result.exit_code == 2 and value not in result.output


def test_notify_on_resolve_defaults_off_and_reads_true(tmp_path: Path) -> None:
    """[alerts] notify_on_resolve is false unless set; `true` turns it on."""
    assert not load_config(write(tmp_path, "[alerts]\n"), {}).alerts.notify_on_resolve
    config = load_config(write(tmp_path, "[alerts]\nnotify_on_resolve = true\n"), {})
    assert config.alerts.notify_on_resolve


def test_slack_pace_defaults_to_one_second(tmp_path: Path) -> None:
    """[slack] pace is 1 s unless set (Slack's own limit: about one message a second per channel)."""
    config = load_config(write(tmp_path, '[slack]\nchannel = "C1"\n'), {"SLACK_BOT_TOKEN": TOKEN})
    assert config.slack is not None and config.slack.pace_s == 1.0
