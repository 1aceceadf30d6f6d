"""`logwatch report` of a fleet without a browser: bounded for thousands of ranks, the same
page whether the replay ran here or on `--jobs` processes, and `--jobs` refused where the
charts need every line in this process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from logwatch.cli import cli
from tests.support.paths import SAMPLES, load_bench

gen = load_bench("gen_fleet")


def _report(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["report", *args])
    return result.exit_code, result.output


def test_two_thousand_ranks_in_one_srun_file_keep_the_page_small(tmp_path: Path) -> None:
    """2 048 ranks of `srun -l` (`N: ` prefixes) in one file, 128 hosts' kernel logs beside it:
    the strip is 256 rows of 8 ranks with the culprit's bin marked, the cascade is one row
    naming 2 047 of 2 048 ranks, and the page stays under 1 MB (issue 36: 8 MB)."""
    spec = gen.FleetSpec(ranks=2048, gpus_per_node=16, steps=1, layout="slurm-label", seed=5)
    run = gen.generate(tmp_path / "run", spec)
    out = tmp_path / "r.html"
    code, output = _report(str(run.root), "-o", str(out))
    assert code == 0, output
    html = out.read_text(encoding="utf-8")
    assert len(html.encode()) < 1_000_000
    rows = re.findall(r'<g class="strip-row( culprit)?" data-ranks="(\d+)-(\d+)"', html)
    assert len(rows) == 256 and rows[0][1:] == ("0", "7") and rows[-1][1:] == ("2040", "2047")
    bin_of = run.culprit_rank // 8
    assert [i for i, row in enumerate(rows) if row[0]] == [bin_of]
    assert f"<h1>logwatch report: {run.root}: 2048 ranks on 128 hosts</h1>" in html
    folded = re.findall(r'<tr class="alert folded[^"]*"[^>]*>(.*?)</tr>', html)
    assert len(folded) == 1 and "nccl-timeout on 2047/2048 ranks, 02:" in folded[0]


def test_jobs_2_writes_the_page_of_one_process(tmp_path: Path) -> None:
    """16 ranks (34 files): `report --jobs 2` (the replay on two spawned processes, the charts'
    two files here) writes the page a report in one process writes, byte for byte."""
    run = gen.generate(tmp_path / "run", gen.FleetSpec(ranks=16, steps=4))
    here, there = tmp_path / "here.html", tmp_path / "there.html"
    code, output = _report(str(run.root), "-o", str(here))
    assert code == 0, output
    command = [sys.executable, "-m", "logwatch", "report", str(run.root), "-o", str(there)]
    done = subprocess.run([*command, "--jobs", "2"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert there.read_bytes() == here.read_bytes()
    assert f"Root cause: rank {run.culprit_rank} ({run.culprit_host})" in here.read_text("utf-8")


def test_jobs_on_files_of_no_fleet_is_refused_in_one_line(tmp_path: Path) -> None:
    """Two training logs that name no rank or host: their charts need every line here, so
    `--jobs 2` stops before any work, in one line, exit 2, and writes nothing."""
    logs = [str(p) for p in sorted((SAMPLES / "dflash").glob("*.log"))[:2]]
    out = tmp_path / "r.html"
    code, output = _report(*logs, "-o", str(out), "--jobs", "2")
    assert code == 2
    assert output.strip().splitlines()[-1] == (
        "Error: --jobs/--dask: the charts of files that are not one run's ranks need every "
        "line in this process; drop --jobs/--dask (a run's folder of rank logs uses them)"
    )
    assert not out.exists()


def test_jobs_with_actions_in_the_config_is_refused_and_without_jobs_they_are_listed(
    tmp_path: Path,
) -> None:
    """A config with an [[action]]: the fleet's report lists what it would have run, which
    needs every line here, so `--jobs 2` is refused in one line (exit 2); without `--jobs` the
    page is written with the action rows."""
    run = gen.generate(tmp_path / "run", gen.FleetSpec(ranks=4, gpus_per_node=2, steps=2))
    config = tmp_path / "logwatch.toml"
    config.write_text(
        '[[action]]\nname = "page"\non = ["gpu-lost"]\nrun = ["true"]\n', encoding="utf-8"
    )
    out = tmp_path / "r.html"
    args = [str(run.root), "-o", str(out), "--config", str(config)]
    code, output = _report(*args, "--jobs", "2")
    assert code == 2
    assert output.strip().splitlines()[-1] == (
        "Error: --jobs/--dask: the report lists what the config's [[action]] commands would have "
        "run, which needs every line in this process; drop --jobs/--dask"
    )
    assert not out.exists()
    code, output = _report(*args)
    assert code == 0, output
    actions = out.read_text(encoding="utf-8").split("<h2>Actions (dry run: nothing was run)</h2>")
    assert len(actions) == 2 and "<td>page</td>" in actions[1]
    assert "kern.log:" in actions[1]  # on the host's kernel log's gpu-lost
