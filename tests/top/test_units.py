"""The pieces of `logwatch top` on their own: facts from parsed frames, formats, key bytes."""

from __future__ import annotations

import io
import math

import polars as pl

from logwatch.parse import parse_lines
from logwatch.top.keys import key_names
from logwatch.top.plugin import TopPlugin, steps_per_s
from logwatch.top.view import Screen, bucket_bar, display_names, plain_lines, render, spark_cells
from tests.top.tmuxkit import run_start, step_line


def _frame(text: str, first_line: int = 1, source: str = "/runs/a/train.log") -> pl.DataFrame:
    """The parsed frame of some lines, as the tail driver hands them to its plugins."""
    lines = pl.Series("text", text.splitlines())
    return parse_lines(lines, source=source, first_line=first_line)


def test_facts_fold_the_latest_values_and_the_loss_series() -> None:
    """Step, grad norm, lr, tok/s, q_hs, q_hsb are the last seen; losses keep NaN in order;
    steps/s comes from the log's own timestamps (4 s apart per step here)."""
    plugin = TopPlugin(now=lambda: 1000.0)
    plugin.observe(_frame(run_start("r1") + step_line(10, "2.0", ts="2026-11-28 14:00:00,000")))
    plugin.observe(_frame(step_line(11, "nan", ts="2026-11-28 14:00:04,000"), first_line=3))
    (row,) = plugin.rows()
    assert (row.run, row.step, row.grad_norm, row.lr, row.q_hs) == ("r1", 11, 1.23, 2.4e-05, 19)
    assert row.q_hsb == (1, 2, 2, 6, 3, 5) and row.throughput == (48292.0, 48292.0)
    assert row.losses[0] == 2.0 and math.isnan(row.losses[1])
    assert row.steps_per_s == 0.25 and row.last_line_s == 1000.0


def test_a_new_run_start_forgets_the_old_runs_facts() -> None:
    """A second `run start:` in the file: the loss series starts over with the new run."""
    plugin = TopPlugin()
    plugin.observe(_frame(run_start("old") + step_line(900, "5.0")))
    plugin.observe(_frame(run_start("new") + step_line(1, "9.0"), first_line=3))
    (row,) = plugin.rows()
    assert (row.run, row.step, row.losses) == ("new", 1, (9.0,))


def test_throughput_is_read_from_the_text_in_its_common_spellings() -> None:
    """`tok/s 48292`, `tokens_per_sec=1.5e3`, `1234 tokens/s`."""
    plugin = TopPlugin()
    text = "step 1 loss 1.0 tok/s 48292\nstep 2 loss 1.0 tokens_per_sec=1.5e3\nstep 3 loss 1.0 1234 tokens/s\n"
    plugin.observe(_frame(text))
    assert plugin.rows()[0].throughput == (48292.0, 1500.0, 1234.0)


def test_steps_per_s_needs_two_points_in_order() -> None:
    """One point: unknown; points 10 s apart: their rate."""
    assert steps_per_s([(0.0, 5)]) is None
    assert steps_per_s([(0.0, 5), (10.0, 25)]) == 2.0


def test_sparkline_marks_non_finite_losses() -> None:
    """NaN and Inf are `!`; the finite ones span the block range."""
    assert spark_cells([1.0, float("nan"), 3.0, float("inf")], 10) == ["▁", "!", "█", "!"]
    assert bucket_bar([0, 4, 8]) == " ▄█"


def test_display_names_drop_the_shared_folder() -> None:
    """`/runs/a/train.log` and `/runs/b/train.log` show as `a/train.log`, `b/train.log`."""
    rows = TopPlugin()
    rows.observe(_frame(step_line(1, "1"), source="/runs/a/train.log"))
    rows.observe(_frame(step_line(1, "1"), source="/runs/b/train.log"))
    assert list(display_names(rows.rows()).values()) == ["a/train.log", "b/train.log"]


def test_key_bytes_become_key_names() -> None:
    """Arrows (both cursor modes), Enter, Backspace, a bare Escape, UTF-8 text."""
    assert key_names(b"\x1b[A\x1bOBq\r\x7f\x1b" + "é".encode()) == [
        "up",
        "down",
        "q",
        "enter",
        "backspace",
        "escape",
        "é",
    ]


def test_log_text_cannot_style_or_control_the_terminal() -> None:
    """Rich markup and escapes in a source name reach the screen as text (plain and rich)."""
    plugin = TopPlugin(now=lambda: 0.0)
    plugin.observe(_frame(step_line(1, "1"), source="/x/[bold red]\x1b[2J.log"))
    rows = tuple(plugin.rows())
    (line,) = plain_lines(rows, 0.0)
    assert line.startswith("/x/[bold red]\\x1b[2J.log ")
    from rich.console import Console

    console = Console(width=160, record=True, color_system=None, file=io.StringIO())
    console.print(render(Screen(width=160, height=30, now_s=0, rows=rows)))
    shown = console.export_text()
    assert "[bold red]\\x1b[2J.log" in shown and "\x1b" not in shown
