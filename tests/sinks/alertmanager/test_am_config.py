"""The [alertmanager] and [prometheus] tables and the tail options: what they accept, and
`file:line: what is wrong` (never a secret) for what they do not."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.cluster_config import with_cluster_options
from logwatch.config import load_config
from logwatch.errors import ConfigError

TOKEN = "am-bearer-SECRET-9931"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "logwatch.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_alertmanager_and_prometheus_tables_are_read(tmp_path: Path) -> None:
    """Every key of the issue's example, a bearer token from the environment, [prometheus] and
    [gpu] export; the token is kept out of repr."""
    path = write(
        tmp_path,
        '[alertmanager]\nurls = ["http://am-0:9093", "http://am-1:9093/"]\nresend_interval = "30s"\n'
        'timeout = "5s"\nlabels = { cluster = "pod-3" }\n'
        'generator_url = "https://wandb.ai/team/proj/runs/{run}"\nbearer_token_env = "AM_TOKEN"\n'
        '[prometheus]\nlisten = "127.0.0.1:9808"\ntextfile_dir = "collector"\n'
        "[gpu]\nexport = false\n",
    )
    config = load_config(path, env={"AM_TOKEN": TOKEN})
    am = config.alertmanager
    assert am is not None
    assert am.urls == ("http://am-0:9093", "http://am-1:9093")
    assert (am.resend_interval_s, am.timeout_s, dict(am.labels)) == (
        30.0,
        5.0,
        {"cluster": "pod-3"},
    )
    assert am.generator_url == "https://wandb.ai/team/proj/runs/{run}"
    assert am.bearer_token == TOKEN and TOKEN not in repr(am)
    assert config.prometheus is not None
    assert config.prometheus.listen == "127.0.0.1:9808"
    assert config.prometheus.textfile_dir == tmp_path / "collector"
    assert config.gpu.export is False
    assert "alertmanager" in config.sink_tables


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            '[alertmanager]\nurls = ["http://a:9093"]\nresend = "1m"\n',
            3,
            "unknown key 'resend' in [alertmanager]",
        ),
        ('[alertmanager]\ntimeout = "1s"\n', 1, "[alertmanager] needs 'urls'"),
        ('[alertmanager]\nurls = ["am-0:9093"]\n', 2, "'am-0:9093' is not an Alertmanager URL"),
        (
            '[alertmanager]\nurls = ["http://a:9093"]\nresend_interval = "soon"\n',
            3,
            "'resend_interval'",
        ),
        (
            '[alertmanager]\nurls = ["http://a:9093"]\nlabels = { "bad-name" = "x" }\n',
            3,
            "label 'bad-name'",
        ),
        ('[alertmanager]\nurls = ["http://a:9093"]\nlabels = { run = "x" }\n', 3, "label 'run'"),
        (
            '[alertmanager]\nurls = ["http://a:9093"]\nbearer_token_env = "NOPE_UNSET"\n',
            3,
            "'NOPE_UNSET', which is not set",
        ),
        ('[prometheus]\nlisten = "9808"\n', 2, "'9808' is not HOST:PORT"),
        ("[prometheus]\nport = 9808\n", 2, "unknown key 'port' in [prometheus]"),
        ('[gpu]\nexport = "no"\n', 2, "'export' must be a boolean"),
    ],
)
def test_mistakes_name_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    """Each mistake is one ConfigError `logwatch.toml:LINE: ...` saying what is wrong."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert message in str(caught.value)


def test_token_file_value_never_appears_in_errors(tmp_path: Path) -> None:
    """A bearer token read from a file is registered as a secret: an error quoting it is masked."""
    (tmp_path / "token").write_text(TOKEN + "\n", encoding="utf-8")
    path = write(
        tmp_path,
        f'[alertmanager]\nurls = ["http://a:9093"]\nbearer_token_file = "token"\n'
        f'labels = {{ x = "{TOKEN}", "bad-{TOKEN}" = "y" }}\n',
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert TOKEN not in str(caught.value)


def test_tail_options_win_over_the_tables(tmp_path: Path) -> None:
    """`--alertmanager` (repeated) replaces the table's urls and keeps its other settings;
    `--metrics` and `--metrics-textfile` fill [prometheus]."""
    path = write(tmp_path, '[alertmanager]\nurls = ["http://old:9093"]\nresend_interval = "5s"\n')
    config = with_cluster_options(
        load_config(path, env={}), ["http://a:9093", "http://b:9093"], "127.0.0.1:1", tmp_path
    )
    assert config.alertmanager is not None
    assert config.alertmanager.urls == ("http://a:9093", "http://b:9093")
    assert config.alertmanager.resend_interval_s == 5.0
    assert config.prometheus is not None
    assert (config.prometheus.listen, config.prometheus.textfile_dir) == ("127.0.0.1:1", tmp_path)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--alertmanager", "ftp://x"],
            "Error: --alertmanager: 'ftp://x' is not an Alertmanager URL",
        ),
        (["--metrics", "nowhere"], "Error: --metrics: 'nowhere' is not HOST:PORT"),
    ],
)
def test_bad_tail_options_are_one_line_and_exit_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    """A bad URL or listen address stops tail before it follows anything: one line, exit 2."""
    result = CliRunner().invoke(
        cli,
        [
            "tail",
            str(tmp_path / "*.log"),
            "--gpu",
            "off",
            "--state-dir",
            str(tmp_path / "s"),
            *args,
        ],
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith(message)
