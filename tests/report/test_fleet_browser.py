"""The report of a fleet as a user opens it in a real headless Chromium: 32 ranks on 4 hosts
(torchrun layout, 68 files), rank R's GPU lost, every other rank timing out: the verdict at
the top naming the culprit, the ranks x time strip with a row per rank and the culprit's
marked, the cascade one row of the alert table, the charts of two files, not 68."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser import keep_artefact
from test_report_browser import render

from tests.support.paths import load_bench

gen = load_bench("gen_fleet")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> object:
    """32 ranks on 4 hosts, the culprit's GPU lost (Xid 79), it hangs."""
    root = tmp_path_factory.mktemp("fleet") / "run"
    return gen.generate(root, gen.FleetSpec(ranks=32, steps=6, seed=3))


def test_verdict_at_the_top_strip_marks_the_culprit_cascade_is_one_row(
    fleet,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """Right under the title, the verdict box names the culprit's rank, host and cause; the
    strip has one row per rank (0..31), the culprit's alone marked, its first line a primary
    and the 31 others' a symptom; the table lists the root-cause first and the 31 ranks'
    timeouts as one folded row; the charts are drawn for two files (the culprit's stdout and
    rank 0's), with no header per file. A screenshot is kept as an artefact."""
    shot = tmp_path / "fleet32.png"
    page, dom = render(tmp_path, fleet.root, shot=shot, width=1280)
    rank, host = fleet.culprit_rank, fleet.culprit_host
    tags = [tag for tag, _ in dom.elements]
    h1 = tags.index("h1")
    assert dom.elements[h1 + 1] == ("section", {"class": "verdict-box", "id": "verdict"})
    html = page.read_text(encoding="utf-8")
    box = html[html.index('<section class="verdict-box"') : html.index("</section>")]
    assert f"Root cause: rank {rank} ({host}): GPU fell off the bus (Xid 79) at " in box
    for key, value in (("rank", str(rank)), ("host", host), ("cause", "gpu-lost"),
                       ("basis", "first-error"), ("victims", "31")):  # fmt: skip
        assert f"<dt>{key}</dt><dd>{value}</dd>" in box
    strip = dom.charts()["ranks"]
    rows = [a for t, a in strip if t == "g" and "strip-row" in a.get("class", "")]
    assert [a["data-rank"] for a in rows] == [str(r) for r in range(32)]
    assert [a["data-rank"] for a in rows if "culprit" in a["class"].split()] == [str(rank)]
    classes = [a["class"] for t, a in strip if t == "rect" and "first" in a.get("class", "")]
    assert sorted(classes) == ["first primary"] + ["first symptom"] * 31
    marks = [a for t, a in strip if t == "g" and a.get("class") == "culprit-mark"]
    assert [a["data-rank"] for a in marks] == [str(rank)]
    assert dom.rows[0]["rule"] == "root-cause"
    folded = [r for r in dom.rows if r["where"].startswith("31 alerts in")]
    assert len(folded) == 1 and folded[0]["rule"] == "nccl-timeout"
    assert folded[0]["summary"].startswith("nccl-timeout on 31/32 ranks, 02:")
    assert len(dom.rows) < 10  # not 33: the cascade is one row
    stamps = [r["ts"][:19] for r in dom.rows]
    assert stamps == sorted(stamps)  # in time order
    assert not [a for t, a in dom.elements if t == "section" and a.get("class") == "run"]
    legend = {
        a["data-series"] for t, a in dom.charts()["loss"] if "legend-entry" in a.get("class", "")
    }
    assert legend == {
        f"rank {rank} on {host} · stdout.log · culprit",
        "rank 0 on node-000 · stdout.log",
    }
    assert len(dom.charts()) < 20  # two files' charts and the strip, not 68 files' charts
    keep_artefact(shot)
    assert shot.stat().st_size > 50_000
