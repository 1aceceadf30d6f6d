"""`replay --dask` and `report --dask`: a real Dask cluster (`dask scheduler` and two `dask
worker` processes on 127.0.0.1) replays a fleet byte-identically to one process, survives a
worker SIGKILLed mid-run, names a file its workers cannot read, refuses an unreachable scheduler
in one line, and gives a fleet's report the page of one process. One module, so that the
cluster (`dask_cluster`, started for this module) is stopped once its tests are done: an idle
cluster costs CPU for as long as it runs."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.cli.jobs import DASK_TIMEOUT_ENV
from logwatch.cli.options import config_and_rules
from logwatch.drivers import cluster
from logwatch.drivers.cluster import DaskRunner
from logwatch.drivers.parallel import Task, TaskResult, replay_parallel
from logwatch.drivers.replay import replay
from logwatch.sources.expand import expand_inputs
from logwatch.testing import FakeClock
from tests.drivers.test_parallel import gen, in_process, spawned

# Not `importorskip`: importing distributed costs each test process 0.3 s of CPU at collection,
# also when it runs none of these tests (the cluster and the clients import it when used).
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None, reason="distributed is not installed"
)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> object:
    """16 ranks on 2 hosts (torchrun layout, 34 files), the culprit's GPU lost."""
    return gen.generate(tmp_path_factory.mktemp("fleet") / "run", gen.FleetSpec(ranks=16, steps=4))


def test_dask_output_is_byte_identical_to_one_process(dask_cluster: str, fleet) -> None:  # type: ignore[no-untyped-def]
    """`--dask SCHEDULER_FILE` prints the JSON document and the text of a replay in one
    process, byte for byte: the verdict first, each event labelled, the same stats."""
    root = str(fleet.root)
    done = spawned("replay", "--format", "json", "--dask", dask_cluster, root)  # as a user runs it
    assert done.returncode == 0, done.stderr
    assert done.stdout == in_process("replay", "--format", "json", root)
    # the text through the same client code, in this process (a Python start and an import of
    # distributed fewer)
    text = in_process("replay", "--format", "text", "--dask", dask_cluster, root)
    assert text == in_process("replay", "--format", "text", root)
    assert f"rank {fleet.culprit_rank} " in text.splitlines()[0]


class KillOneWorker:
    """A runner that SIGKILLs one worker process as the first result arrives (its nanny starts
    a new one; the tasks it held run again)."""

    def __init__(self, runner: DaskRunner) -> None:
        self.runner = runner
        self.killed: list[int] = []

    def run(self, tasks: Sequence[Task]) -> Iterator[TaskResult]:
        for result in self.runner.run(tasks):
            if not self.killed:
                pids = self.runner.client.run(os.getpid)
                pid = sorted(pids.values())[0]
                os.kill(pid, signal.SIGKILL)
                self.killed.append(pid)
            yield result


def test_a_worker_killed_mid_run_changes_nothing(dask_cluster_alone: str, fleet) -> None:  # type: ignore[no-untyped-def]
    """One file per task (34 tasks); a worker is SIGKILLed after the first result: every file
    is replayed once in the output (none lost, none doubled) and the events, stats and verdict
    are those of one process."""
    _, specs = config_and_rules(None, (), False)
    files = expand_inputs([str(fleet.root)]).files
    expected = replay(files, specs)
    runner = DaskRunner(dask_cluster_alone)
    try:
        killer = KillOneWorker(runner)
        got = replay_parallel(files, specs, killer, workers=2, check_here=False, task_files=1)
    finally:
        runner.close()
    assert killer.killed
    assert got.unread == ()
    assert json.dumps(got.to_json()) == json.dumps(expected.to_json())
    assert got.fleet is not None and expected.fleet is not None
    assert [e.to_json() for e in got.fleet.verdicts] == [
        e.to_json() for e in expected.fleet.verdicts
    ]


def test_a_file_the_workers_cannot_read_is_named_the_rest_completes(dask_cluster: str, tmp_path: Path) -> None:  # fmt: skip
    """A mode-000 rank file: one line naming it and the worker, the verdict still first on
    stdout from the other 33 files, `1 of 34 files not read`, exit 2."""
    fleet = gen.generate(tmp_path / "run", gen.FleetSpec(ranks=16, steps=4))
    files = expand_inputs([str(fleet.root)]).files
    victim = next(p for p in files if p.endswith("/0/stdout.log") and "node-000" in p)
    os.chmod(victim, 0)
    done = spawned("replay", "--dask", dask_cluster, str(fleet.root))
    assert done.returncode == 2, done.stderr
    named = [line for line in done.stderr.splitlines() if victim in line]
    assert len(named) == 1
    assert "permission" in named[0].lower()
    assert "(on tcp://127.0.0.1:" in named[0]
    assert "logwatch: 1 of 34 files not read" in done.stderr
    assert " root-cause " in done.stdout.splitlines()[0]


def test_an_unreachable_scheduler_is_one_line_before_any_work(tmp_path: Path) -> None:
    """Nothing listens on the port: after the give-up ($LOGWATCH_DASK_TIMEOUT, 1 s here; the
    default is pinned below), one line naming the address, exit 2, no output."""
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.0\n")
    command = [sys.executable, "-m", "logwatch", "replay", "--dask", "tcp://127.0.0.1:9"]
    env = {**os.environ, DASK_TIMEOUT_ENV: "1"}
    done = subprocess.run(
        [*command, str(log), str(log)], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "Error: Dask scheduler tcp://127.0.0.1:9: unreachable, gave up after 1 s "
        "(Connection refused); check the address and that `dask scheduler` runs there"
    ]


def test_the_give_up_is_10_s_unless_the_variable_says_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without $LOGWATCH_DASK_TIMEOUT the scheduler gets 10 s (the probe's clock is a fake
    clock, as `cluster.time`: the 10 s pass at once); a value that is not seconds over 0 is one
    line, exit 2."""
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.0\n")
    clock = FakeClock()
    monkeypatch.setattr(cluster, "time", clock)
    monkeypatch.delenv(DASK_TIMEOUT_ENV, raising=False)
    args = ["replay", "--dask", "tcp://127.0.0.1:9", str(log), str(log)]
    result = CliRunner().invoke(cli, args)
    assert (result.exit_code, result.stdout) == (2, "")
    assert "unreachable, gave up after 10 s (Connection refused)" in result.stderr
    assert 9.0 <= clock.monotonic() <= 10.0  # the probe's sleeps
    for bad in ("0", "-1", "ten", "nan"):
        monkeypatch.setenv(DASK_TIMEOUT_ENV, bad)
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2
        assert result.stderr.splitlines() == [
            f"Error: ${DASK_TIMEOUT_ENV}: {bad!r} is not a number of seconds over 0 (e.g. 10)"
        ]


def test_workers_with_another_logwatch_are_refused_before_any_work(dask_cluster: str, fleet, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    """This client says it is logwatch 9.9.9 (a dist-info ahead on its path) and the workers
    have 0.1.0: one line naming a worker and both versions, exit 2, no output."""
    info = tmp_path / "shadow" / "logwatch-9.9.9.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: logwatch\nVersion: 9.9.9\n")
    env = {**os.environ, "PYTHONPATH": str(info.parent)}
    command = [sys.executable, "-m", "logwatch", "replay", "--dask", dask_cluster, str(fleet.root)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error: Dask worker tcp://127.0.0.1:")
    assert lines[0].endswith(
        "has logwatch 0.1.0, this client 9.9.9; install the same version on both"
    )


def test_dask_report_is_the_page_of_one_process(dask_cluster: str, fleet, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """16 ranks (34 files): the HTML of `report --dask SCHEDULER_FILE` (its client in this
    process, as `replay`'s text above) equals that of a report in one process; its verdict
    names the culprit."""
    here, there = tmp_path / "here.html", tmp_path / "there.html"
    result = CliRunner().invoke(cli, ["report", str(fleet.root), "-o", str(here)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(
        cli, ["report", str(fleet.root), "-o", str(there), "--dask", dask_cluster]
    )
    assert result.exit_code == 0, result.output
    assert there.read_bytes() == here.read_bytes()
    assert f"Root cause: rank {fleet.culprit_rank} ({fleet.culprit_host})" in here.read_text(
        "utf-8"
    )
