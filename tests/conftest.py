"""The fixtures the tests share, one per concern; shared helpers live in tests/support/."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from logwatch.testing import FakeSlack
from tests.fakenvml.build import build, compiler
from tests.support.slackhelp import TOKEN


@pytest.fixture
def write_log(tmp_path: Path) -> Callable[..., str]:
    """Write bytes to a log file in a temp folder and return its path as a string."""

    def write(data: bytes, name: str = "train.log") -> str:
        path = tmp_path / name
        path.write_bytes(data)
        return str(path)

    return write


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    """A fake Slack server on a loopback port of its own, bot token `TOKEN`, no rate limit."""
    with FakeSlack(token=TOKEN, rate_per_s=None) as server:
        yield server


@pytest.fixture(scope="session")
def fake_nvml_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in libnvidia-ml.so.1 (tests/fakenvml), compiled once per test process."""
    if compiler() is None:
        pytest.skip("no C compiler (gcc/cc): cannot build the stand-in libnvidia-ml.so.1")
    return build(tmp_path_factory.mktemp("fakenvml"))
