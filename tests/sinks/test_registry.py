"""The sink registry: tail's sinks come from the config's tables, the terminal always first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from logwatch.config import Config, SlackConfig, load_config
from logwatch.sinks.base import ListSink, Sink
from logwatch.sinks.registry import SINKS, open_sinks
from logwatch.sinks.slack.sink import SlackSink
from logwatch.testing import FakeSlack


def test_a_config_with_slack_gets_a_slack_sink_after_the_terminal(tmp_path: Path) -> None:
    """A config file with a [slack] table opens a SlackSink, after the terminal sink."""
    with FakeSlack(rate_per_s=None) as fake:
        path = tmp_path / "logwatch.toml"
        path.write_text(f'[slack]\nchannel = "C0ALERTS01"\nbase_url = "{fake.base_url}"\n')
        config = load_config(path, env={"SLACK_BOT_TOKEN": fake.token})
        terminal = ListSink()
        sinks = open_sinks(terminal, config, tmp_path / "state")
        try:
            assert sinks[0] is terminal
            assert [type(s) for s in sinks[1:]] == [SlackSink]
        finally:
            for sink in sinks:
                sink.close()


def test_without_sink_tables_only_the_terminal(tmp_path: Path) -> None:
    """No config, or a config without sink tables: the terminal sink alone."""
    path = tmp_path / "logwatch.toml"
    path.write_text('[gpu]\nmode = "off"\n')
    terminal = ListSink()
    assert open_sinks(terminal, Config(), tmp_path) == [terminal]
    assert open_sinks(terminal, load_config(path), tmp_path) == [terminal]


def test_a_registered_table_is_all_a_new_sink_needs(tmp_path: Path) -> None:
    """The factory registered for a table the config has is called with the config and the state
    directory, and its sink follows the terminal; one for an absent table is not called."""
    seen: list[tuple[Config, Path]] = []
    other = ListSink()

    def factory(config: Config, state_dir: Path) -> Sink:
        seen.append((config, state_dir))
        return other

    config = Config(slack=SlackConfig("C0ALERTS01", "http://127.0.0.1:9/api/"))
    terminal = ListSink()
    assert open_sinks(terminal, config, tmp_path, {"slack": factory}) == [terminal, other]
    assert seen == [(config, tmp_path)]
    assert open_sinks(terminal, Config(), tmp_path, {"slack": factory}) == [terminal]
    assert len(seen) == 1
    assert "slack" in SINKS


def test_importing_the_registry_does_not_import_slack_sdk() -> None:
    """slack_sdk loads only when a [slack] sink is opened."""
    code = (
        "import sys, logwatch, logwatch.sinks.registry, logwatch.drivers.runner; "
        "print('slack_sdk' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
