"""The fixtures the tests share, one per concern; shared helpers live in tests/support/."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest
from hypothesis import settings

from logwatch.cli import COMMANDS, cli
from logwatch.testing import FakeSlack
from tests.fakenvml.build import build, compiler
from tests.support import properties
from tests.support.slackhelp import TOKEN

properties.register()

# The `logwatch tail` and `top` processes the tests start (hundreds) skip the warm-up, about
# 0.4 s of CPU each, unless a test asks for it: it only makes the first alert a few ms sooner,
# and is tested on its own (tests/drivers/test_warmup.py) and in one process
# (tests/drivers/test_tail_cli.py). LOGWATCH_WARM_UP=1 runs the suite with it.
os.environ.setdefault("LOGWATCH_WARM_UP", "0")


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile logwatch once (the first process of the run), then load the Hypothesis
    profile `HYPOTHESIS_PROFILE` names (dev when unset), before any test module computes its
    `examples(N)`; `--hypothesis-profile` on the command line wins. In a process that collects
    the tests, no automatic garbage collection until they are collected (see
    `pytest_collection_finish`)."""
    if not hasattr(config, "workerinput"):  # xdist's controller, or a run without xdist
        _compiled()
        _rewritten(config)
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        # importing ~200 test modules (and what they import) grows the heap to ~145 000
        # objects, with 18 full collections on the way: 1.6 s of the 7.5 s of CPU each
        # process spends collecting, for almost no garbage
        gc.disable()
    if config.getoption("hypothesis_profile", None):
        return
    try:
        settings.load_profile(properties.chosen())
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection made (`gc.freeze`: the test modules, pytest, hypothesis, polars,
    ~145 000 objects), so that a full collection scans only what the tests make after it.
    Each in-process tail driver collects fully as it starts (`drivers/gc_rounds.py`, which in
    a `logwatch tail` process scans ~40 000 objects in 15-25 ms): in a test process that scan
    was 0.1-0.2 s of CPU, two or three times per driver run, as was each of the interpreter's
    own full collections. The collector's own freeze is tested apart
    (tests/drivers/test_gc_rounds.py unfreezes for its tests). Then automatic collection
    is on again. First every command's module is imported (`logwatch replay` imports only its
    own, `cli.COMMANDS`): a command a test looked up first would bind, by `from ... import`,
    what that test had patched, and keep it for the tests after."""
    ctx = click.Context(cli)
    for name in COMMANDS:
        cli.get_command(ctx, name)
    gc.collect()
    gc.freeze()
    gc.enable()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Automatic collection back on, whatever happened to collection."""
    gc.enable()


def _compiled() -> None:
    """The editable install runs logwatch from source, and machines that set
    PYTHONDONTWRITEBYTECODE (CI's does) never cache its bytecode: every `logwatch` process the
    tests start (tail, top, the --jobs pool, Dask workers: hundreds) would compile the package
    again, about 0.15 s of CPU each. Written once here, read by all of them, as an installed
    copy is."""
    import compileall

    import logwatch

    compileall.compile_dir(Path(logwatch.__file__).parent, quiet=1)


def _rewritten(config: pytest.Config) -> None:
    """Each test process rewrites the asserts of every test module it imports (~2.8 of the
    ~5 CPU s a process spends collecting), and under PYTHONDONTWRITEBYTECODE (CI's) pytest
    never caches the result, so three xdist workers did it three times. Rewritten once here,
    before the workers start, into the cache pytest reads whatever that setting says
    (`__pycache__/*.pyc` of pytest's own tag, written atomically, checked against the source's
    hash): each worker loads them. A cached file that is stale or unreadable is rewritten by
    the worker that imports it, as before."""
    if config.getoption("assertmode") != "rewrite":
        return
    from _pytest.assertion import rewrite

    state = config.stash[rewrite.assertstate_key]
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        if not (path.name.startswith("test_") or path.name == "conftest.py"):
            continue
        cache = rewrite.get_cache_dir(path)
        pyc = cache / (path.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(path, pyc) is not None or not rewrite.try_makedirs(cache):
            continue
        source_hash, code = rewrite._rewrite_test(path, config)
        rewrite._write_pyc(state, code, source_hash, pyc)


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


SLOW_MODULES = (
    "tests/cluster/",  # a real Alertmanager and Prometheus
    "tests/report/test_report_browser.py",  # headless Chromium
    "tests/report/test_fleet_browser.py",
    "tests/report/test_fleet_report.py",  # spawned --jobs processes
    "tests/top/test_top_tmux.py",  # top in tmux
    "tests/top/test_top_plain.py",
    "tests/top/test_top_gpu.py",
    "tests/drivers/test_tail_cli.py",  # `logwatch tail` as a process
    "tests/drivers/test_tail_inputs.py",
    "tests/drivers/test_tail_rotation.py",
    "tests/drivers/test_tail_statedir.py",
    "tests/drivers/test_tail_stdin.py",
    "tests/sinks/test_terminal.py",
    "tests/sinks/slack/test_slack_cli.py",
    "tests/sinks/slack/test_slack_tail.py",
    "tests/sinks/slack/test_slack_gpu_notice.py",
    "tests/sinks/slack/test_slack_kill9.py",
    "tests/sources/test_fileset_inputs.py",
    "tests/gpu/test_live.py",
    "tests/gpu/test_gpu_procs.py",
    "tests/test_wheel.py",  # builds and installs the wheel
    "tests/test_cli_startup.py",
)
"""Test files (node ids' prefixes) that run real processes, services or a browser: `slow`, with
every property (hypothesis) test, so `pytest -m "not slow"` is a quick first try."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of `SLOW_MODULES` and the hypothesis tests `slow`."""
    for item in items:
        is_property = hasattr(getattr(item, "obj", None), "hypothesis")
        if is_property or item.nodeid.startswith(SLOW_MODULES):
            item.add_marker(pytest.mark.slow)
