"""The README's promises: its Python example runs as written, from the checkout."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from tests.support.paths import ROOT


def test_readme_python_example_runs() -> None:
    """The block after `<!-- python-example -->` runs and prints the first NaN alert."""
    text = (ROOT / "README.md").read_text("utf-8")
    match = re.search(r"<!-- python-example -->\n```python\n(.*?)```", text, re.S)
    assert match is not None, "README has no python example"
    out = subprocess.run(
        [sys.executable, "-c", match.group(1)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("nan-loss firing 111 loss is nan at step 1403 (line 111)\n")


def test_readme_rule_test_example_passes_as_shown(tmp_path: Path) -> None:
    """The README's own pack and its `logwatch test` file, copied as written, give the output
    the README shows (exit 0); a wrong line in it fails with exit 1."""
    text = (ROOT / "README.md").read_text("utf-8")
    blocks = {
        name: re.search(rf"<!-- ruletest-{name} -->\n```toml\n(.*?)```", text, re.S)
        for name in ("pack", "tests")
    }
    shown = re.search(r"```\n\$ logwatch test my-rules\.test\.toml\n(.*?)```", text, re.S)
    assert blocks["pack"] and blocks["tests"] and shown, "README lacks the logwatch test example"
    (tmp_path / "my-rules.toml").write_text(blocks["pack"].group(1), "utf-8")
    tests = tmp_path / "my-rules.test.toml"
    tests.write_text(blocks["tests"].group(1), "utf-8")
    result = CliRunner().invoke(cli, ["test", str(tests)])
    assert (result.exit_code, result.output) == (0, shown.group(1))
    tests.write_text(blocks["tests"].group(1).replace("line = 2", "line = 3"), "utf-8")
    assert CliRunner().invoke(cli, ["test", str(tests)]).exit_code == 1


def test_readme_links_every_builtin_pack_and_its_tests() -> None:
    """Each file of the top-level `rules/` (a pack or its tests) is linked from the README, and
    every `rules/` link there leads to a file."""
    text = (ROOT / "README.md").read_text("utf-8")
    links = set(re.findall(r"\]\((rules/[^)]+)\)", text))
    assert links == {f"rules/{p.name}" for p in (ROOT / "rules").iterdir() if p.is_file()}


OUTPUT = re.compile(
    r"<!-- output(?P<json>-json)?: (?P<cwd>[\w/.-]+): logwatch (?P<args>[^\n]*?) -->\n"
    r"```\w*\n(?P<shown>.*?)```",
    re.S,
)
"""An excerpt of a command's output: `<!-- output: FOLDER: logwatch ARGS -->` before the block;
`output-json`: the block is the first JSON object printed, `"..."` for a value cut."""
ELIDED = "..."


def _shown_output(monkeypatch: pytest.MonkeyPatch, cwd: str, args: str) -> str:
    monkeypatch.chdir(ROOT / cwd)
    result = CliRunner().invoke(cli, shlex.split(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_readme_outputs_are_what_the_program_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each README block marked `<!-- output: ... -->` is a run of consecutive lines of what the
    command prints today, run again here (a README left behind a change fails: the replay
    summary once lacked `run-crashed`); a JSON one is the first object, field for field."""
    text = (ROOT / "README.md").read_text("utf-8")
    excerpts = list(OUTPUT.finditer(text))
    assert len(excerpts) >= 3
    for excerpt in excerpts:
        out = _shown_output(monkeypatch, excerpt["cwd"], excerpt["args"])
        where = f"README.md:{text[: excerpt.start()].count(chr(10)) + 1}"
        if excerpt["json"]:
            shown = json.loads(excerpt["shown"])
            first = json.loads(out.splitlines()[0])
            kept = {key: value for key, value in first.items() if shown.get(key) != ELIDED}
            assert {k: v for k, v in shown.items() if v != ELIDED} == kept, where
            continue
        lines, got = excerpt["shown"].splitlines(), out.splitlines()
        found = any(got[i : i + len(lines)] == lines for i in range(len(got) - len(lines) + 1))
        assert found, f"{where}: the excerpt differs from `logwatch {excerpt['args']}`:\n{out}"


def test_readme_slack_partly_resolved_excerpt_is_what_the_message_lists() -> None:
    """The README's `Still firing (1 of 2)` list is what Slack's message body lists for nan-loss
    and nan-grad firing on line 42 of runs/a/train.log, nan-grad resolved at line 57."""
    from logwatch.alerts import FIRING, RESOLVED, AlertEvent, Severity, Status
    from logwatch.sinks.slack.messages import partly_lines

    text = (ROOT / "README.md").read_text("utf-8")
    shown = re.search(r"```\n(\*Still firing \(1 of 2\):\*\n.*?)```", text, re.S)
    assert shown is not None, "README lacks the partly resolved Slack excerpt"

    def event(rule: str, line: int, status: Status = FIRING) -> AlertEvent:
        return AlertEvent(
            rule, Severity.CRITICAL, status, "runs/a/train.log", line, None, 1200, None, rule
        )

    loss, grad = event("nan-loss", 42), event("nan-grad", 42)
    ended = {grad.fingerprint: event("nan-grad", 57, RESOLVED)}
    assert "\n".join(partly_lines([loss, grad], ended)) + "\n" == shown.group(1)


def test_readme_top_status_line_is_what_top_prints_piped() -> None:
    """The README's piped `top` line is `plain_lines` of a source with those facts (the status
    line's fields, their order and number formats; ages go in 5 s steps: it said `last=3s`)."""
    from logwatch.top.plugin import SourceRow
    from logwatch.top.view import plain_lines

    text = (ROOT / "README.md").read_text("utf-8")
    shown = re.search(r"```\n(/runs/a/train\.log run=.*?)\n```", text)
    assert shown is not None, "README lacks top's piped status line"
    row = SourceRow(
        source="/runs/a/train.log",
        run="slammed2",
        step=1308,
        steps_per_s=0.251,
        last_line_s=100.0,
        stalled=False,
        losses=(2.171,),
        grad_norm=2.2,
        lr=2.4e-05,
        throughput=(48_500.0,),
        q_hs=27,
        q_hsb=(),
        alerts=(),
    )
    assert plain_lines([row], 105.0) == [shown.group(1)]
