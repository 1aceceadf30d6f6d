"""`report --dask`: a fleet's report with its replay on a real Dask cluster (the run's
scheduler and two workers, `dask_cluster`) is the page of a report in one process, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from tests.cluster.test_dask_replay import fleet  # noqa: F401  # the fixture
from tests.drivers.test_parallel import spawned

pytest.importorskip("distributed")


def test_dask_report_is_the_page_of_one_process(dask_cluster: str, fleet, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811  # the fixture
    """16 ranks (34 files): the HTML of `report --dask SCHEDULER_FILE` equals that of a report
    in one process; its verdict names the culprit."""
    here, there = tmp_path / "here.html", tmp_path / "there.html"
    result = CliRunner().invoke(cli, ["report", str(fleet.root), "-o", str(here)])
    assert result.exit_code == 0, result.output
    done = spawned("report", str(fleet.root), "-o", str(there), "--dask", dask_cluster)
    assert done.returncode == 0, done.stderr
    assert there.read_bytes() == here.read_bytes()
    assert f"Root cause: rank {fleet.culprit_rank} ({fleet.culprit_host})" in here.read_text(
        "utf-8"
    )
