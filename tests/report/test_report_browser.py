"""The report as a user opens it: rendered by a real headless Chromium with the network off."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from browser import Dom, dump_dom
from click.testing import CliRunner

from logwatch.cli import cli
from tests.support.paths import SAMPLES
from tests.support.samples import expected_alerts

DFLASH = sorted((SAMPLES / "dflash").glob("*.log"))


def render(
    tmp_path: Path,
    *logs: Path | str,
    name: str = "report.html",
    args: tuple[str, ...] = (),
    shot: Path | None = None,
    width: int = 1400,
) -> tuple[Path, Dom]:
    """`logwatch report LOGS -o FILE [ARGS]`, then the DOM Chromium made of the file (and,
    with `shot`, its `width`x3000 screenshot from the same load)."""
    out = report(tmp_path / name, *logs, args=args)
    return out, Dom(dump_dom(out, tmp_path / "profile", shot=shot, width=width))


def report(out: Path, *logs: Path | str, args: tuple[str, ...] = ()) -> Path:
    """`logwatch report LOGS -o OUT [ARGS]`: the page, exit 0."""
    result = CliRunner().invoke(cli, ["report", *map(str, logs), "-o", str(out), *args])
    assert result.exit_code == 0, result.output
    return out


def points(elements: list[tuple[str, dict[str, str]]]) -> int:
    """How many data points a chart draws (lines, areas, alert bars, markers)."""
    drawn = sum(int(a.get("data-points", "0")) for t, a in elements if t in ("polyline", "polygon"))
    bars = sum(1 for t, a in elements if "alert-span" in a.get("class", ""))
    return drawn + bars


class SamplePages:
    """Each DFLASH sample's report, rendered (DOM and screenshot: one Chromium load) the first
    time a test of this module asks for it in this test process."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.made: dict[Path, tuple[Path, Dom, Path]] = {}

    def __call__(self, log: Path) -> tuple[Path, Dom, Path]:
        """The page file, its DOM and its screenshot."""
        if log not in self.made:
            folder = self.folder / log.stem
            folder.mkdir()
            shot = folder / f"{log.stem}.png"
            self.made[log] = (*render(folder, log, shot=shot), shot)
        return self.made[log]


@pytest.fixture(scope="module")
def sample_page(tmp_path_factory: pytest.TempPathFactory) -> SamplePages:
    """The module's rendered sample reports."""
    return SamplePages(tmp_path_factory.mktemp("samples"))


@pytest.mark.parametrize("log", DFLASH, ids=[p.name for p in DFLASH])
def test_every_chart_draws_points_and_the_table_lists_the_expected_alerts(
    sample_page: SamplePages, log: Path
) -> None:
    """Each sample's report renders offline: every chart has data points, the alert table holds
    exactly the sample's expected alerts; a screenshot is saved as an artifact."""
    page, dom, shot = sample_page(log)
    html = page.read_text(encoding="utf-8")
    assert "http://" not in html and "https://" not in html
    assert not [a for t, a in dom.elements if t in ("link", "img", "iframe") or a.get("src")]
    charts = dom.charts()
    assert {"loss", "grad-norm", "throughput", "alerts"} <= set(charts)
    for chart_id, elements in charts.items():
        if chart_id == "alerts" and not expected_alerts(log):
            continue
        assert points(elements) > 0, f"{chart_id} drew nothing"
    got = [(int(r["where"].rsplit(":", 1)[1]), r["rule"], r["status"].split()[0]) for r in dom.rows]
    assert got == expected_alerts(log)
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000


def test_nan_sample_shows_every_nan_and_inf_as_a_marker(sample_page: SamplePages) -> None:
    """train_nan.log: NaN losses at steps 1403-1405, +Inf loss at 1430, grad norm +Inf at 1403
    and NaN at 1404-1405, each a marker on the axis (none dropped, none invented)."""
    _, dom, _ = sample_page(SAMPLES / "dflash" / "train_nan.log")
    charts = dom.charts()

    def markers(chart: str) -> list[str]:
        return [
            a["class"].split()[1]
            for t, a in charts[chart]
            if t == "g" and a.get("class", "").startswith("nf ")
        ]

    assert sorted(markers("loss")) == ["inf-marker", "nan-marker", "nan-marker", "nan-marker"]
    assert sorted(markers("grad-norm")) == ["inf-marker", "nan-marker", "nan-marker"]


def test_log_text_is_escaped_never_run(tmp_path: Path) -> None:
    """A `<script>` in a log line is shown as text in the alert table; the page's only script
    is its own."""
    log = tmp_path / "evil.log"
    log.write_text(
        "2026-11-28 14:09:05,117 INFO step 1 | loss 2.3 | grad_norm 1.1\n"
        '2026-11-28 14:09:09,201 INFO step 2 | loss nan <script>document.title="owned"</script>'
        " <img src=x onerror=alert(1)>\n",
        encoding="utf-8",
    )
    page, dom = render(tmp_path, log)
    assert [t for t, _ in dom.elements].count("script") == 1
    assert not [a for t, a in dom.elements if t == "img"]
    assert '<script>document.title="owned"</script>' in dom.rows[0]["text"]
    assert "&lt;script&gt;" in page.read_text(encoding="utf-8")


def test_rotated_files_share_one_time_axis_in_time_order(tmp_path: Path) -> None:
    """`train.log.1.gz` (older) given after `train.log`, `--x time`: the report orders them by
    time and draws both on one axis, with a band where the second file starts."""
    lines = (SAMPLES / "dflash" / "train_nan.log").read_bytes().splitlines(keepends=True)
    old, new = tmp_path / "train.log.1.gz", tmp_path / "train.log"
    old.write_bytes(gzip.compress(b"".join(lines[:100])))
    new.write_bytes(b"".join(lines[100:]))
    page, dom = render(tmp_path, new, old, args=("--x", "time"))
    headings = [a for t, a in dom.elements if t == "h2"]
    assert len(headings) >= 2
    html = page.read_text(encoding="utf-8")
    assert html.index(f"<h2>{old}</h2>") < html.index(f"<h2>{new}</h2>")
    loss = [a for t, a in dom.charts()["loss"] if t == "polyline" and a.get("class") == "series"]
    assert len(loss) == 4  # two files, each drawn in linear and in log scale
    assert {a["data-series"] for a in loss} == {"train.log.1.gz", "train.log"}
    assert any("restart" in a.get("class", "") for _, a in dom.charts()["loss"])
