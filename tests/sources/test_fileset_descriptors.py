"""The open-file limit and inotify's limits, said once: files beyond the limit wait (one line:
how many, why, the fix) and are opened as descriptors free; no `cannot open` line per file."""

from __future__ import annotations

import concurrent.futures
import errno
import multiprocessing
import os
import re
import resource
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from logwatch.sources.descriptors import RESERVE
from logwatch.sources.fileset import FileSet
from logwatch.testing import UnavailableWatcher
from tests.support.paths import ROOT

FIX = (
    "Fix: `ulimit -n 4096` in the shell that starts logwatch, or `LimitNOFILE=4096` under "
    "[Service] in its systemd unit"
)


def logs(folder: Path, count: int) -> list[str]:
    paths = []
    for n in range(count):
        path = folder / f"r{n:03d}.log"
        path.write_bytes(b"step 1 | loss 1.0\n")
        paths.append(str(path))
    return paths


def open_fds() -> list[int]:
    """The descriptors this process has open."""
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            os.fstat(int(name))
        except OSError:
            continue  # the listing's own, closed since
        fds.append(int(name))
    return fds


def test_files_beyond_the_limit_wait_said_once_and_are_opened_as_descriptors_free(
    tmp_path: Path,
) -> None:
    """A limit leaving room for 3 of 5 files: one line, 3 followed; rescans say nothing more;
    when 2 followed files are deleted and retired the 2 others are opened, and that is said
    once."""
    paths = logs(tmp_path, 5)
    said: list[str] = []
    base = 10
    files: FileSet

    def descriptors() -> tuple[int, int]:  # 10 open besides the followed files
        return (base + RESERVE + 3, base + len(files.followers))

    files = FileSet(
        [str(tmp_path / "*.log")],
        watcher_factory=None,
        status=said.append,
        descriptors=descriptors,
    )
    try:
        first = files.changes(0.0)
        assert first == paths[:3]
        assert all(files.open(path, 0.0) is not None for path in first)
        assert files.changes(1.0) == []  # no room yet: nothing to open, nothing said
        assert files.changes(2.0) == []
        for follower in list(files.followers.values())[:2]:  # two logs deleted and retired
            os.remove(follower.path)
            files.drop(follower)
        second = files.changes(3.0)
        assert second == paths[3:]
        assert all(files.open(path, 3.0) is not None for path in second)
        files.changes(4.0)
        assert said == [
            "2 of 5 files cannot be opened now: too many open files (ulimit -n is 29; logwatch "
            f"keeps 16 of them for its state and connections); following the other 3 and "
            f"opening the rest as descriptors free. {FIX}",
            "open files: every file is followed now (some waited 3s for a descriptor)",
        ]
    finally:
        files.close()


def test_an_open_refused_for_want_of_descriptors_waits_without_a_line_per_file(
    tmp_path: Path,
) -> None:
    """The real EMFILE (a limit the share could not see: no /proc): no `cannot open` per file,
    the round opens no more after the first refusal; the next rescan says once how many wait,
    and once all are opened, that too. Run in a fresh process: the limit is the process's, and
    threads other tests left in this worker may take a descriptor between the count and the opens."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        failure = pool.submit(_emfile_scenario, str(tmp_path)).result(timeout=120)
    assert failure is None, failure


def _emfile_scenario(tmp: str) -> str | None:
    """The scenario of the test above, in the process that runs it: None, or what failed."""
    try:
        _emfile_checks(Path(tmp))
    except AssertionError:
        return traceback.format_exc()
    return None


def _emfile_checks(tmp_path: Path) -> None:
    paths = logs(tmp_path, 6)
    said: list[str] = []
    files = FileSet(
        [str(tmp_path / "*.log")],
        watcher_factory=None,
        status=said.append,
        descriptors=lambda: None,  # as if unknown: every path is tried
    )
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        found = files.changes(0.0)
        assert found == paths
        in_use = open_fds()
        # the limit bounds descriptor numbers: the one that leaves exactly 2 free below it
        limit = next(n for n in range(1, soft) if n - sum(fd < n for fd in in_use) == 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
        try:
            opened = [files.open(path, 0.0) for path in found]
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert sum(f is not None for f in opened) == 2
        assert said == []  # said by the next rescan, once for all of them
        assert files.changes(1.0) == paths[2:]  # no limit is known: they are tried again
        assert said == [
            "4 of 6 files cannot be opened now: too many open files (the open-file limit, "
            "ulimit -n); following the other 2 and opening the rest as descriptors free. "
            f"{FIX}"
        ]
        assert sum(files.open(path, 1.0) is not None for path in paths[2:]) == 4
        files.changes(2.0)
        assert said[1:] == [
            "open files: every file is followed now (some waited 1s for a descriptor)"
        ]
    finally:
        files.close()


@pytest.mark.parametrize(
    ("err", "name"), [(errno.ENOSPC, "max_user_watches"), (errno.EMFILE, "max_user_instances")]
)
def test_an_inotify_limit_names_its_sysctl_and_polling_is_said_once(
    tmp_path: Path, err: int, name: str
) -> None:
    """Out of inotify watches (ENOSPC) or instances (EMFILE): one line naming the limit, its
    value, the sysctl that raises it, and that tail polls instead; rescans still find files."""
    said: list[str] = []
    files = FileSet(
        [str(tmp_path / "*.log")],
        watcher_factory=UnavailableWatcher(err),
        status=said.append,
        poll_interval_s=2.0,
    )
    files.start()
    (tmp_path / "a.log").write_bytes(b"")
    try:
        assert files.changes(0.0) == [str(tmp_path / "a.log")]
        files.changes(5.0)
    finally:
        files.close()
    value = Path(f"/proc/sys/fs/inotify/{name}").read_text(encoding="ascii").strip()
    assert said == [
        f"file events unavailable: inotify's limit fs.inotify.{name} = {value} is reached; "
        f"polling every 2s instead. Fix: sudo sysctl fs.inotify.{name}=524288 (and a line "
        f"`fs.inotify.{name} = 524288` in /etc/sysctl.d/ to keep it)"
    ]


def test_tail_under_ulimit_64_over_112_files_says_it_once_and_alerts(tmp_path: Path) -> None:
    """A real `logwatch tail` under `ulimit -n 64` over 112 logs: one line for the files that
    wait (no `cannot open` per file, no failed checkpoint), and a NaN written to a followed
    file still alerts."""
    folder = tmp_path / "logs"
    folder.mkdir()
    logs(folder, 112)
    command = (
        f"ulimit -n 64; exec {sys.executable} -m logwatch tail '{folder}/*.log' --gpu off "
        f"--format jsonl --state-dir {tmp_path / 'state'} --poll-interval 0.2s"
    )
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out = proc.stdout
        assert out is not None
        with open(folder / "r000.log", "a", encoding="utf-8") as log:
            log.write("step 2 | loss nan\n")
        alert = out.readline()
        assert '"rule": "nan-loss"' in alert and "r000.log" in alert
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    lines = stderr.splitlines()
    caught_up = [line for line in lines if "caught up on" in line]
    others = [line for line in lines if "caught up on" not in line]
    assert others[:4] == [
        f"logwatch: watching '{folder}/*.log' (112 files: {folder}/r000.log, "
        f"{folder}/r001.log, +110)",
        f"logwatch: 25 rules from 5 packs (built-in); state in {tmp_path / 'state'}",
        "logwatch: alerts to the terminal",
        "logwatch: GPUs: off (--gpu off or [gpu] mode)",
    ]
    (line,) = others[4:]
    found = re.fullmatch(
        r"logwatch: (\d+) of 112 files cannot be opened now: too many open files \(ulimit -n is "
        r"64; logwatch keeps 16 of them for its state and connections\); following the other "
        rf"(\d+) and opening the rest as descriptors free\. {re.escape(FIX)}",
        line,
    )
    assert found is not None, line
    waiting, followed = int(found[1]), int(found[2])
    assert waiting + followed == 112 and followed == len(caught_up) > 0


def test_an_emfile_from_inotify_at_the_open_file_limit_names_ulimit(tmp_path: Path) -> None:
    """inotify_init's EMFILE when this process has no descriptor left is the open-file limit,
    not inotify's instances: the line says so, with the ulimit fix."""
    said: list[str] = []
    files = FileSet(
        [str(tmp_path / "*.log")],
        watcher_factory=UnavailableWatcher(errno.EMFILE),
        status=said.append,
        descriptors=lambda: (64, 64),
    )
    files.start()
    files.close()
    assert said == [
        "file events unavailable: too many open files (ulimit -n is 64); polling every 1s "
        f"instead. {FIX}"
    ]
