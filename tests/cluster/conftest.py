"""Fixtures for the tests against the real Alertmanager and Prometheus: everything started
through `cluster` is stopped (or killed) at teardown, whatever the test did; and the run's one
Dask cluster (`dask_cluster`, tests/cluster/daskkit.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import daskkit
from tests.cluster.engines import Alertmanager, Engine, Node, Prometheus, Webhook


class Cluster:
    """Starts engines, webhook receivers and logwatch nodes under one temp folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._engines: list[Engine] = []
        self._nodes: list[Node] = []
        self._hooks: list[Webhook] = []

    def webhook(self) -> Webhook:
        hook = Webhook()
        self._hooks.append(hook)
        return hook

    def alertmanager(self, name: str, webhook: Webhook, **options: Any) -> Alertmanager:
        am = Alertmanager(self.root / name, webhook, **options)
        self._engines.append(am)
        return am

    def prometheus(self, targets: list[str]) -> Prometheus:
        prom = Prometheus(self.root / "prometheus", targets)
        self._engines.append(prom)
        return prom

    def node(self, name: str, config: str, *args: str, log: str = "") -> Node:
        """A logwatch tail on ROOT/name/*.log with `config` as its logwatch.toml."""
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "train.log").write_text(log, encoding="utf-8")
        (folder / "logwatch.toml").write_text(config, encoding="utf-8")
        return self.adopt(Node(folder, ["--config", str(folder / "logwatch.toml"), *args]))

    def adopt(self, node: Node) -> Node:
        """Kill this node at teardown too."""
        self._nodes.append(node)
        return node

    def close(self) -> None:
        for node in self._nodes:
            node.kill()
        for engine in self._engines:
            engine.stop()
        for hook in self._hooks:
            hook.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Real engines on loopback, torn down at the end of the test."""
    started = Cluster(tmp_path)
    try:
        yield started
    finally:
        started.close()


@pytest.fixture(scope="module")
def dask_scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The scheduler file of the run's Dask cluster: a scheduler and two one-thread workers
    (each under a nanny, which restarts it), shared by the test processes that run the module's
    tests; stopped after them (its idle heartbeats cost CPU while it runs)."""
    pytest.importorskip("distributed")
    with daskkit.shared_cluster(daskkit.shared_folder(tmp_path_factory.getbasetemp())) as found:
        yield found


@pytest.fixture
def dask_cluster(dask_scheduler: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The run's Dask cluster, which other tests may use at the same time: its scheduler file."""
    with daskkit.turn(daskkit.shared_folder(tmp_path_factory.getbasetemp()), alone=False):
        yield dask_scheduler


@pytest.fixture
def dask_cluster_alone(
    dask_scheduler: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The run's Dask cluster, no other test's while this one runs (it kills a worker): its
    scheduler file."""
    with daskkit.turn(daskkit.shared_folder(tmp_path_factory.getbasetemp()), alone=True):
        yield dask_scheduler
