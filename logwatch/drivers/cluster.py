"""`replay --dask ADDRESS`: the tasks of `logwatch.drivers.parallel` on an existing Dask cluster
(a `tcp://host:port` scheduler, or the scheduler file `dask scheduler --scheduler-file` and
dask-jobqueue write) whose workers see the same files. The client checks before any work that
the scheduler answers and that every worker has this logwatch, ships its rules with each task,
and takes each result as it arrives (then releases it on the cluster)."""

from __future__ import annotations

import json
import os
import re
import socket
import time
import uuid
from collections.abc import Iterator, Sequence
from importlib import metadata
from typing import Any

from logwatch.drivers.parallel import Task, TaskResult, replay_task
from logwatch.errors import ClusterError

CONNECT_TIMEOUT_S = 10.0


def _import_dask() -> Any:
    try:
        import distributed
    except ImportError:
        raise ClusterError(
            "--dask needs Dask's distributed scheduler client: pip install 'logwatch[dask]'"
        ) from None
    return distributed


class DaskRunner:
    """Tasks on the workers of a running Dask cluster."""

    def __init__(self, address: str, *, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        is_file = "://" not in address
        if is_file and not os.path.isfile(address):
            raise ClusterError(
                f"{address}: no such scheduler file; give tcp://HOST:PORT or the file "
                "`dask scheduler --scheduler-file` wrote"
            )
        _probe(_scheduler_address(address) if is_file else address, address, timeout_s)
        distributed = _import_dask()
        self.address = address
        self._distributed = distributed
        self.client = _connect(distributed, address, timeout_s)
        try:
            self.workers = _check_workers(self.client, address, timeout_s)
        except BaseException:
            self.client.close()
            raise

    def run(self, tasks: Sequence[Task]) -> Iterator[TaskResult]:
        """Each task's result as it completes; a task on a worker that died runs again."""
        run_id = uuid.uuid4().hex[:12]
        futures = [
            self.client.submit(
                replay_task, task, key=f"logwatch-replay-{run_id}-{task.index}", pure=False
            )
            for task in tasks
        ]
        done = self._distributed.as_completed(futures, loop=self.client.loop)
        del futures  # the iterator holds what is pending; a result is dropped once taken
        for future in done:
            try:
                result: TaskResult = future.result()
            except self._distributed.KilledWorker as exc:
                raise ClusterError(
                    f"Dask cluster {self.address}: a task was lost with {exc.last_worker} "
                    "several times (distributed.scheduler.allowed-failures); the workers die "
                    "on these files: check their memory limit"
                ) from None
            future.release()
            yield result

    def close(self) -> None:
        """Leave the cluster (it goes on running)."""
        self.client.close()


def _connect(distributed: Any, address: str, timeout_s: float) -> Any:
    """A client of the scheduler at `address` (or named in the scheduler file `address`)."""
    is_file = "://" not in address
    where = {"scheduler_file": address} if is_file else {"address": address}
    try:
        return distributed.Client(
            **where, timeout=f"{timeout_s}s", set_as_default=False, direct_to_workers=False
        )
    except (OSError, TimeoutError) as exc:
        raise ClusterError(
            f"Dask scheduler {address}: unreachable, gave up after {timeout_s:g} s ({exc}); "
            "check the address and that `dask scheduler` runs there"
        ) from None


def _scheduler_address(path: str) -> str:
    """The address a scheduler file names."""
    try:
        with open(path, encoding="utf-8") as handle:
            address = json.load(handle)["address"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ClusterError(
            f"{path}: not a Dask scheduler file ({type(exc).__name__}: {exc}); give the file "
            "`dask scheduler --scheduler-file` wrote"
        ) from None
    return str(address)


def _probe(address: str, given: str, timeout_s: float) -> None:
    """Wait up to `timeout_s` for the scheduler's port to accept a connection (a scheduler that
    is starting gets that long), so an unreachable one is said at once after it."""
    found = re.fullmatch(r"(?:tcp|tls)://\[?([^\]]+?)\]?:(\d+)/?", address)
    if found is None:
        return  # another protocol (ucx, inproc): the client's own timeout applies
    host, port = found.group(1), int(found.group(2))
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            socket.create_connection((host, port), timeout=max(left, 0.1)).close()
            return
        except OSError as exc:
            if time.monotonic() + 0.5 >= deadline:
                raise ClusterError(
                    f"Dask scheduler {given}: unreachable, gave up after {timeout_s:g} s "
                    f"({exc.strerror or exc}); check the address and that `dask scheduler` "
                    "runs there"
                ) from None
            time.sleep(0.5)


def _check_workers(client: Any, address: str, timeout_s: float) -> int:
    """The cluster's worker threads, after checking each worker has this logwatch."""
    try:
        client.wait_for_workers(1, timeout=timeout_s)
    except TimeoutError:
        raise ClusterError(
            f"Dask scheduler {address}: no worker joined in {timeout_s:g} s; start some "
            "(`dask worker ADDRESS`)"
        ) from None
    ours = metadata.version("logwatch")
    # `metadata.version` travels by name: it runs on a worker that lacks logwatch too
    found = client.run(metadata.version, "logwatch", on_error="return")
    for worker, version in sorted(found.items()):
        if isinstance(version, BaseException):
            raise ClusterError(
                f"Dask worker {worker} has no logwatch ({type(version).__name__}: {version}); "
                f"install logwatch {ours} where the workers run"
            )
        if version != ours:
            raise ClusterError(
                f"Dask worker {worker} has logwatch {version}, this client {ours}; install the "
                "same version on both"
            )
    threads: int = sum(client.nthreads().values())
    return max(threads, 1)
