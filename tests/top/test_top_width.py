"""`logwatch top` at any width: each source is exactly one line, the columns line up under the
header, and what does not fit is cut with `…` from the least important column (unit-rendered at
every width, and in a real terminal at 80, 120, 200 columns and across a resize)."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from logwatch.alerts import FIRING, AlertEvent, Severity
from logwatch.parse import parse_lines
from logwatch.top.layout import METRIC_COLUMNS, fit
from logwatch.top.plugin import TopPlugin
from logwatch.top.view import Screen, render
from tests.top.tmuxkit import START_S, TmuxTop, append, needs_tmux, run_start, step_line

WIDTHS = (80, 100, 120, 160, 200)
NAMES = ("alpha", "beta", "rank1-of-a-run-with-a-long-descriptive-name")


def _plugin() -> TopPlugin:
    """Three runs, one with a long name; beta has three alerts firing (a wide alerts cell)."""
    plugin = TopPlugin(now=lambda: 0.0)
    for name in NAMES:
        text = run_start(name) + step_line(100, "2.5") + step_line(101, "2.4")
        frame = parse_lines(
            pl.Series("text", text.splitlines()), source=f"/runs/{name}.log", first_line=1
        )
        plugin.observe(frame)
    for rule in ("nan-loss", "nan-grad", "nan-iterations"):
        plugin.emit(
            AlertEvent(rule, Severity.CRITICAL, FIRING, "/runs/beta.log", 3, None, 101, None, "x")
        )
    return plugin


def _rendered(width: int) -> list[str]:
    from rich.console import Console

    rows = tuple(_plugin().rows())
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(render(Screen(width=width, height=30, now_s=0, rows=rows)))
    return console.export_text().splitlines()


def table_of(lines: list[str]) -> tuple[str, list[str]]:
    """The table's header line and the lines after it up to the first that is no run row."""
    (at,) = [i for i, line in enumerate(lines) if line.startswith("source ")]
    rows = []
    for line in lines[at + 1 :]:
        if not line or line.startswith(("GPUs", "recent alerts", "  ", "q quit")):
            break
        rows.append(line)
    return lines[at], rows


def column_starts(header: str) -> list[int]:
    """Where each header word starts."""
    return [m.start() for m in re.finditer(r"\S+", header)]


def assert_aligned(header: str, rows: list[str]) -> None:
    """Every cell of every row starts where its header word does (a cell is text after a
    space, or at column 0)."""
    for row in rows:
        for start in column_starts(header)[1:]:
            if start < len(row.rstrip()):
                assert row[start - 1] == " ", f"{row!r} is not aligned with {header!r}"


@pytest.mark.parametrize("width", WIDTHS)
def test_each_run_is_one_line_within_the_width_and_aligned(width: int) -> None:
    """At 80..200 columns: no line wider than the terminal, one row line per run (each starts
    with its name), the header and the rows share their column starts, alerts cut with `…`."""
    lines = _rendered(width)
    assert max(len(line) for line in lines) <= width
    header, rows = table_of(lines)
    assert len(rows) == len(NAMES), "\n".join(lines)
    assert header.split()[-1] == "alerts"
    assert_aligned(header, rows)
    (beta,) = [row for row in rows if row.startswith("beta.log")]
    assert "nan-loss" in beta and ("nan-iterations" in beta or beta.rstrip().endswith("…"))


def test_narrower_terminals_lose_the_least_important_columns_first() -> None:
    """The columns kept at each width are a prefix of the importance order: lr and gnorm go
    first, step, age and loss stay at 80 columns; at 200 every column is there at full width."""
    by_importance = [c.name for c in sorted(METRIC_COLUMNS, key=lambda c: c.rank)]
    for width in WIDTHS:
        kept = {name for name, _ in fit(width, 20).columns}
        assert kept == set(by_importance[: len(kept)]), (width, kept)
        assert {"step", "last", "loss"} <= kept
    wide = fit(200, 20)
    assert dict(wide.columns) == {c.name: c.width for c in METRIC_COLUMNS}
    assert "lr" not in dict(fit(80, 20).columns)


def test_a_long_source_name_keeps_its_end() -> None:
    """Cut source names lose their start (`…descriptive-name.log`), not the part that differs."""
    _, rows = table_of(_rendered(80))
    (long_row,) = [row for row in rows if row.startswith("…")]
    assert long_row.split()[0].endswith("name.log")


# --- in a real terminal ----------------------------------------------------------------------


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """Three live runs; beta has a NaN (nan-loss, nan-grad... firing), gamma a long name."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in NAMES:
        (logs / f"{name}.log").write_text(run_start(name) + step_line(100, "2.5000"))
    return logs


def expected_starts(width: int) -> list[int]:
    """Where each header word starts in a frame `width` wide for NAMES (`layout.fit`)."""
    layout = fit(width, max(len(f"{name}.log") for name in NAMES))
    starts, at = [0], layout.source_w + 1
    for _, column_w in layout.columns:
        starts.append(at)
        at += column_w + 1
    return [*starts, at]


def _laid_out(screen: str, width: int) -> bool:
    """Whether the screen's table header is the one drawn for `width` columns."""
    headers = [line for line in screen.splitlines() if line.startswith("source ")]
    return bool(headers) and column_starts(headers[0]) == expected_starts(width)


def _top(tmp_path: Path, runs: Path, width: int) -> TmuxTop:
    args = [str(runs / "*.log"), "--state-dir", str(tmp_path / "state"), "--gpu", "off"]
    return TmuxTop(tmp_path, args, width=width, height=30)


@pytest.fixture
def nan_on_beta(runs: Path) -> Iterator[None]:
    """A NaN loss on beta before top starts: its alerts column has something to cut."""
    append(runs / "beta.log", step_line(101, "nan"))
    yield


@needs_tmux
@pytest.mark.parametrize("width", (80, 120, 200))
def test_in_tmux_each_run_is_one_aligned_line(
    tmp_path: Path, runs: Path, nan_on_beta: None, width: int
) -> None:
    """In a `width`-column tmux pane: one line per run, none wider than the pane, aligned."""
    top = _top(tmp_path, runs, width)
    try:
        screen = top.wait_for(
            lambda s: "nan-loss" in s and _laid_out(s, width) and all(n[:4] in s for n in NAMES),
            START_S,
        )
        assert max(len(line) for line in screen.splitlines()) <= width
        header, rows = table_of(screen.splitlines())
        assert len(rows) == len(NAMES), screen
        assert_aligned(header, rows)
    finally:
        top.close()


@needs_tmux
def test_in_tmux_a_resize_while_running_refits_the_table(
    tmp_path: Path, runs: Path, nan_on_beta: None
) -> None:
    """200 -> 80 -> 120 columns while running: after each resize, one aligned line per run
    within the new width (columns come back when it widens)."""
    top = _top(tmp_path, runs, 200)
    try:
        top.wait_for(lambda s: "nan-loss" in s and _laid_out(s, 200), START_S)
        for width in (80, 120):
            top.resize(width, 30)
            screen = top.wait_for(lambda s, w=width: _laid_out(s, w))  # redrawn for the width
            header, rows = table_of(screen.splitlines())
            assert len(rows) == len(NAMES), top.screen()
            assert_aligned(header, rows)
            shown = {name for name, _ in fit(width, 40).columns}
            assert ("lr" in header.split()) == ("lr" in shown), header
        assert "gnorm" in table_of(top.screen().splitlines())[0]
    finally:
        top.close()


def test_wide_characters_count_as_two_cells() -> None:
    """A source named in CJK (two cells a character) is cut by cells: no line of the frame is
    wider than 80 cells, and the row still ends its name with the file name."""
    from rich.console import Console

    from logwatch.top.layout import cell_len

    plugin = _plugin()
    name = "/runs/実験ログ実験ログ実験ログ実験ログ実験ログ-rank2.log"
    frame = parse_lines(pl.Series("text", [step_line(5, "1.0").strip()]), source=name, first_line=1)
    plugin.observe(frame)
    console = Console(width=80, record=True, color_system=None, file=io.StringIO())
    console.print(render(Screen(width=80, height=30, now_s=0, rows=tuple(plugin.rows()))))
    lines = console.export_text().splitlines()
    assert max(cell_len(line) for line in lines) <= 80
    (row,) = [line for line in lines if "rank2.log" in line]
    assert row.startswith("…") and cell_len(row.split()[0]) <= 40
