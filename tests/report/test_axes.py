"""What the report's x axis counts and where each alert sits on it: steps by default (a
restart resumed from a checkpoint overlays the run it resumed), `--x time`, each file's own
line numbers when there is neither, and a time for every alert that a time can be given."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.alerts import AlertEvent, Severity, Status
from logwatch.cli import cli
from logwatch.drivers.replay import ReplayOptions
from logwatch.report.build import build_report
from logwatch.report.collect import Place
from logwatch.report.page import when_cell
from logwatch.report.svg import LEFT, PLOT_W
from logwatch.rules.loader import builtin_rules_dir, load_rules, pack_files
from tests.report.runs import three_runs

RULES = load_rules(pack_files(builtin_rules_dir()))


def _chart(html: str, chart_id: str) -> str:
    found = re.search(rf'<svg class="chart" id="{chart_id}".*?</svg>', html, re.S)
    assert found is not None, f"no {chart_id} chart"
    return found[0]


def _first_x(svg: str, series: str) -> float:
    found = re.search(rf'data-series="{re.escape(series)}"[^>]*points="([\d.]+),', svg)
    assert found is not None, series
    return float(found[1])


def _hf(path: Path, losses: list[str]) -> Path:
    """An HF Trainer log: dict lines, no timestamp, no step."""
    path.write_text(
        "".join(
            f"{{'loss': {v}, 'grad_norm': 1.2, 'epoch': {i / 10}}}\n" for i, v in enumerate(losses)
        ),
        encoding="utf-8",
    )
    return path


def test_a_resumed_run_overlays_the_run_it_resumed_on_the_step_axis(tmp_path: Path) -> None:
    """Three runs with steps: the default axis is the step; r2, resumed at step 12,000, starts
    at step 12,000's place (not a day to the right), r3 at step 0 like r1."""
    report = build_report([str(p) for p in three_runs(tmp_path)], RULES)
    assert report.x == "step"
    loss = _chart(report.html, "loss")
    at = lambda step: LEFT + step / 26_000 * PLOT_W  # noqa: E731  # the axis spans 0..26,000
    assert abs(_first_x(loss, "train_b.log · r2") - at(12_000)) < 1
    assert abs(_first_x(loss, "train_b.log · r3 · restart 1") - at(0)) < 1
    assert abs(_first_x(loss, "train_a.log") - at(0)) < 1
    assert "3 run(s), on one step axis" in report.html


def test_time_axis_on_request_with_ticks_that_name_the_day_where_it_changes(
    tmp_path: Path,
) -> None:
    """`--x time` draws the same runs by wall clock; tick labels carry the date only where it
    changes (the runs are days apart)."""
    report = build_report([str(p) for p in three_runs(tmp_path)], RULES, x="time")
    assert report.x == "time"
    ticks = re.findall(r'class="tick xt"[^>]*>([^<]+)<', _chart(report.html, "loss"))
    assert ticks[0] == "11-26 12:00" and "11-27 00:00" in ticks and "12:00" in ticks, ticks


def test_without_time_or_steps_each_file_keeps_its_own_line_numbers(tmp_path: Path) -> None:
    """Two HF logs (no timestamp, no step): one line-number axis on which each file's ticks
    are its own line numbers and a divider names it."""
    a = _hf(tmp_path / "a.log", [f"{2 - i / 100:.3f}" for i in range(40)])
    b = _hf(tmp_path / "b.log", [f"{1.9 - i / 100:.3f}" for i in range(30)])
    report = build_report([str(a), str(b)], RULES)
    assert report.x == "line"
    loss = _chart(report.html, "loss")
    dividers = re.findall(r'class="divider-label"[^>]*>([^<]+)<', loss)
    assert dividers == ["a.log", "b.log"]
    ticks = [
        (float(x), int(label))
        for x, label in re.findall(r'class="tick xt" x="([\d.]+)"[^>]*>(\d+)<', loss)
    ]
    split = LEFT + 40.5 / 70 * PLOT_W  # where b.log's line 1 sits, about
    assert [n for x, n in ticks if x < split] == [10, 20, 30, 40]
    assert [n for x, n in ticks if x > split] == [10, 20, 30]
    assert "on one line-number axis" in report.html


def test_x_axis_that_a_file_cannot_have_is_one_error_line(tmp_path: Path) -> None:
    """`--x time` on a log without timestamps, `--x step` on one without steps: exit 2 with
    one line naming the file and the fix."""
    log = _hf(tmp_path / "hf.log", ["2.0", "1.9"])
    for axis, lacks in (("time", "has no timestamps"), ("step", "has no step lines")):
        result = CliRunner().invoke(
            cli, ["report", str(log), "-o", str(tmp_path / "r.html"), "--x", axis]
        )
        assert result.exit_code == 2, result.output
        assert result.output.count("\n") == 1
        assert f"--x {axis}: {log} {lacks}; leave out --x" in result.output


def _event(**changes: object) -> AlertEvent:
    fields: dict[str, object] = {
        "rule": "run-crashed",
        "severity": Severity.CRITICAL,
        "status": Status.FIRING,
        "source": "train.log",
        "line": 145,
        "ts": None,
        "step": None,
        "value": None,
        "summary": "the run crashed (line 145)",
    }
    fields.update(changes)
    return AlertEvent(**fields)  # type: ignore[arg-type]  # the fields above


def test_every_alert_has_a_time_or_says_why_not() -> None:
    """Own time: as is. None: the last timestamp before it, from the engine's `ts_from_line`
    label or the report's own carry, marked with the line it came from, and "at end of
    file" when found there. No timestamp in the log: blank, with why; never `-`."""
    then = datetime(2026, 11, 28, 14, 10, 45)
    own = _event(ts=then)
    assert when_cell(own, None) == ("2026-11-28 14:10:45", "")
    carried = Place(then, 140, 1430, 1, at_end=True)
    assert when_cell(_event(), carried) == (
        "2026-11-28 14:10:45",
        "at end of file, time of line 140",
    )
    labelled = _event(ts=then, labels={"ts_from_line": "140"})
    assert when_cell(labelled, None) == ("2026-11-28 14:10:45", "time of line 140")
    assert when_cell(labelled, Place(then, 140, None, 1, at_end=False))[1] == "time of line 140"
    nothing = Place(None, None, None, 0, at_end=True)
    assert when_cell(_event(), nothing) == ("", "no timestamp in the log before this line")
    lost = Place(None, None, None, 0, at_end=False, looked_up=False)
    assert when_cell(_event(), lost)[0] == ""
    assert "too long before the alert" in when_cell(_event(), lost)[1]


def test_progress_on_a_terminal_and_nothing_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal, stderr shows what is being read (rich's bar); piped, stderr stays
    empty and stdout says only what was written."""
    logs = [p.name for p in three_runs(tmp_path)]
    out = "r.html"
    monkeypatch.chdir(tmp_path)
    piped = CliRunner().invoke(cli, ["report", *logs, "-o", out])
    assert piped.exit_code == 0 and piped.stderr == ""
    main, sub = pty.openpty()
    done = subprocess.run(
        [sys.executable, "-m", "logwatch", "report", *logs, "-o", out],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=sub,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=True,
    )
    os.close(sub)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(main)
    assert f"reading {logs[0]}".encode() in seen
    assert done.stdout.decode().startswith(f"wrote {out} (")


def test_an_alert_on_an_untimed_line_mid_file_shows_the_time_before_it(tmp_path: Path) -> None:
    """A CUDA OOM line without a timestamp in the middle of a timed log read in small blocks:
    its row in the table shows the time of the line before it, marked, not at end of file;
    the chart places it at that step."""
    log = tmp_path / "oom.log"
    lines = [
        f"2026-11-28 14:{i // 60:02d}:{i % 60:02d},000 INFO [train] step {i} | loss 2.5 | "
        f"grad_norm 1.0"
        for i in range(600)
    ]
    lines.insert(300, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = build_report([str(log)], RULES, options=ReplayOptions(block_bytes=8192))
    row = re.search(r"<td class=\"ts\">([^<]*)<small>([^<]*)</small></td>(?:(?!</tr>).)*cuda-oom",
                    report.html, re.S)  # fmt: skip
    assert row is not None, report.html[-3000:]
    assert (row[1], row[2]) == ("2026-11-28 14:04:59", "time of line 300")


def test_files_on_a_line_number_axis_are_told_apart_by_dividers_not_restart_bands(
    tmp_path: Path,
) -> None:
    """Two HF logs on the line-number axis: no grey restart band where the second file's
    first loss is (its divider names it), and each file is its own series."""
    a = _hf(tmp_path / "a.log", ["2.0", "1.9", "1.8"])
    b = _hf(tmp_path / "b.log", ["1.7", "1.6"])
    loss = _chart(build_report([str(a), str(b)], RULES).html, "loss")
    assert 'class="band restart"' not in loss
    assert set(re.findall(r'<polyline class="series" data-series="([^"]+)"', loss)) == {
        "a.log",
        "b.log",
    }
