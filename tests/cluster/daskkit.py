"""One real Dask cluster (`dask scheduler` and two one-thread `dask worker`s under nannies, on
127.0.0.1) for the Dask tests (tests/cluster/test_dask.py) of a run, shared by the xdist
workers that run them.

A cluster costs about 4 s of CPU to start and stop (five Python processes importing
distributed) and, idle, about 4 s a minute with Dask's default settings (heartbeats, its
profiler and monitors; measured at load 17), about 0.7 s with the tests' `QUIET` ones: started once,
not once per xdist worker, and stopped when the module's tests are done. The first test process that needs it starts it
and owns it; each process that uses it counts itself in a file under the run's shared temp
folder; the owner stops it at the module's end, once no other process counts itself in. Tests
share it, but one that kills a worker mid-run has it alone (`turn`): another test's client,
counting workers at that moment, would see the kill.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

BIN = Path(sys.executable).parent
# The workers cannot override file modes even as root (the tests' user): a mode-000 file is
# unreadable where it is replayed, as it is for a user's job.
NO_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
QUIET = {
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "2s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__GIL__ENABLED": "False",
    "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s",
}
"""Dask settings for the test cluster: no statistical profiler (a stack sample every 10 ms in
each worker, for a dashboard these processes do not serve) and the event-loop, system and
memory monitors at 1-2 s, not 20-500 ms. What runs the tasks is unchanged; idle, the cluster
then costs about a sixth of the CPU (measured: start, 30 s idle and stop 5.7 -> 3.9 CPU s)."""
OWNER_WAITS_S = 1800.0
"""How long the owner waits at its end for the other processes to leave before it stops the
cluster anyway."""


def shared_folder(basetemp: Path) -> Path:
    """The folder all test processes of this run see: under xdist each worker's basetemp is
    `<run's basetemp>/popen-gwN`, so its parent; without xdist, the basetemp itself."""
    return basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp


@contextmanager
def locked(path: Path, *, shared: bool = False) -> Iterator[None]:
    """A lock on `path` across the run's processes: exclusive, or `shared` with other shared
    holders."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def start(folder: Path) -> tuple[Path, list[subprocess.Popen[bytes]], list[IO[str]]]:
    """A scheduler writing `folder/scheduler.json` and two workers, once both have joined."""
    scheduler_file = folder / "scheduler.json"
    logs = [open(folder / f"{name}.log", "w") for name in ("scheduler", "w1", "w2")]  # noqa: SIM115  # closed by stop()
    scheduler = [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0"]
    scheduler += ["--no-dashboard", "--scheduler-file", str(scheduler_file)]
    quiet = {**os.environ, **QUIET}
    procs = [subprocess.Popen(scheduler, stdout=logs[0], stderr=subprocess.STDOUT, env=quiet)]
    try:
        deadline = time.monotonic() + 120
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        prefix = NO_DAC if shutil.which("setpriv") and os.geteuid() == 0 else []
        env = {**quiet, "POLARS_MAX_THREADS": "1"}
        for log in logs[1:]:
            worker = [str(BIN / "dask"), "worker", "--scheduler-file", str(scheduler_file)]
            worker += ["--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"]
            procs.append(
                subprocess.Popen(prefix + worker, stdout=log, stderr=subprocess.STDOUT, env=env)
            )
        import distributed

        with distributed.Client(scheduler_file=str(scheduler_file), timeout="120s") as client:
            client.wait_for_workers(2, timeout=180)
    except BaseException:
        stop(procs, logs)
        raise
    return scheduler_file, procs, logs


def stop(procs: list[subprocess.Popen[bytes]], logs: list[IO[str]]) -> None:
    """SIGINT each process, workers first; SIGKILL what has not ended after 30 s."""
    for proc in reversed(procs):
        proc.send_signal(signal.SIGINT)
    for proc in reversed(procs):
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for log in logs:
        log.close()


@contextmanager
def shared_cluster(run_folder: Path) -> Iterator[str]:
    """The run's cluster (started here if no process runs one): yields its scheduler file;
    at exit this process leaves it, and stops it if it started it, once the others have left."""
    folder = run_folder / "dask-cluster"
    folder.mkdir(exist_ok=True)
    lock, users_file = folder / "lock", folder / "users.json"
    me = os.getpid()
    owned: tuple[list[subprocess.Popen[bytes]], list[IO[str]]] | None = None
    with locked(lock):
        users = _read(users_file)
        scheduler_file = folder / "scheduler.json"
        if not users:  # none running (or its owner stopped it): this process starts one
            scheduler_file.unlink(missing_ok=True)
            scheduler_file, procs, logs = start(folder)
            owned = (procs, logs)
        _write(users_file, [*users, me])
    try:
        yield str(scheduler_file)
    finally:
        deadline = time.monotonic() + OWNER_WAITS_S
        while True:
            with locked(lock):
                users = [pid for pid in _read(users_file) if pid != me]
                if owned is None or not users or time.monotonic() > deadline:
                    if owned is not None:
                        stop(*owned)
                        users = []  # whoever still counted itself in needs a new one
                    _write(users_file, users)
                    break
            time.sleep(0.5)


@contextmanager
def turn(run_folder: Path, *, alone: bool) -> Iterator[None]:
    """A test's time on the run's cluster: with the other tests, or `alone`."""
    with locked(run_folder / "dask-cluster" / "turn", shared=not alone):
        yield


def _read(path: Path) -> list[int]:
    return list(json.loads(path.read_text())) if path.exists() else []


def _write(path: Path, pids: list[int]) -> None:
    path.write_text(json.dumps(pids))
