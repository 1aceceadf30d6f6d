"""How many files a tail may hold open: the open-file limit (`ulimit -n`) shared out before the
files are opened, so that 112 logs under `ulimit -n 64` give one line (how many wait, why, the
fix), not one `cannot open` per file, and the checkpoint and Slack's connections keep the
descriptors they need. Files that wait are opened as descriptors free (a followed file retired,
the limit raised); that is said too. And what to say when inotify's own limits are reached.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Container, Sequence

from logwatch.faults import Episode, RepeatedFaults

RESERVE = 16
"""Descriptors never given to log files: the checkpoint's and state files' writes, Slack's and
Alertmanager's connections, the metrics server, the file-event watcher."""
NO_DESCRIPTOR = frozenset({errno.EMFILE, errno.ENFILE})
KEY = "open files"
ULIMIT_FIX = (
    "`ulimit -n 4096` in the shell that starts logwatch, or `LimitNOFILE=4096` under [Service] "
    "in its systemd unit"
)
INOTIFY_LIMITS = {
    errno.ENOSPC: "max_user_watches",  # inotify_add_watch: the user's watches are used up
    errno.EMFILE: "max_user_instances",  # inotify_init: the user's inotify instances are
}


def open_descriptors() -> tuple[int, int] | None:
    """(soft open-file limit, descriptors open now) of this process; None when unlimited or
    unknown (no /proc)."""
    import resource  # Unix only; tail runs on Linux

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        in_use = len(os.listdir("/proc/self/fd")) - 1  # less the listing's own descriptor
    except OSError:
        return None
    return int(soft), in_use


class DescriptorBudget:
    """Shares the open-file limit out to the files a rescan found: those that fit are opened,
    the rest wait, said once (`RepeatedFaults`: at the start, once a minute while they wait,
    when all are followed)."""

    def __init__(
        self,
        report: Callable[[str], None],
        *,
        descriptors: Callable[[], tuple[int, int] | None] = open_descriptors,
        reserve: int = RESERVE,
    ) -> None:
        self.descriptors, self.reserve = descriptors, reserve
        self._now = 0.0
        self.faults = RepeatedFaults(report, clock=lambda: self._now)
        self.waiting: set[str] = set()  # paths not opened for want of descriptors
        self._room: int | None = None  # descriptors left for log files (None: no limit)
        self._refused: dict[str, int] = {}  # paths whose open failed EMFILE/ENFILE -> errno
        self._short: set[str] = set()  # paths refused or not tried for want of a descriptor
        self._limit: int | None = None

    def share(
        self, fresh: Sequence[str], already_open: Container[str], followed: int, now: float
    ) -> list[str]:
        """Of the paths a rescan found, in order, those to open now (a path `already_open`
        takes no new descriptor); the others wait, and the state of waiting is said.
        `followed`: how many files are followed already."""
        self._now = now
        # counting the descriptors lists /proc/self/fd (4 ms with 2000 open on a loaded
        # machine): only when there is something to open
        counts = self.descriptors() if fresh else None
        if counts is None:
            self._room, self._limit = None, None
        else:
            self._limit, in_use = counts
            self._room = max(self._limit - in_use - self.reserve, 0)
        room = len(fresh) if self._room is None else self._room
        opened: list[str] = []
        waiting: list[str] = []
        taken = 0
        for path in fresh:  # the new paths of a rescan, not lines: no polars here
            if path in already_open:
                opened.append(path)
            elif taken < room:
                opened.append(path)
                taken += 1
            else:
                waiting.append(path)
        refused, self._refused = self._refused, {}
        # and those an open refused since (a limit the count did not show: none, no /proc)
        short, self._short = self._short, set()
        self.waiting = set(waiting) | (short & set(fresh))
        if self.waiting:
            total = followed + len(fresh)
            said = self._said(len(self.waiting), total, refused)
            self.faults.failed(KEY, said, detail=self._detail())
        else:
            self.faults.recovered(KEY, _all_followed)
        return opened

    def may_open(self) -> bool:
        """Whether one more file may be opened now (taking its descriptor from the share)."""
        if self._room is None:
            return True
        if self._room <= 0:
            return False
        self._room -= 1
        return True

    def refused(self, path: str, exc: OSError) -> bool:
        """An open that failed: True (it waits, said at the next rescan, and the round opens
        no more) when for want of a descriptor, False for any other reason."""
        if exc.errno not in NO_DESCRIPTOR:
            return False
        self._refused[path] = exc.errno
        self.skipped(path)
        self._room = 0
        return True

    def skipped(self, path: str) -> None:
        """A path not opened for want of a descriptor: it waits (said at the next rescan)."""
        self.waiting.add(path)
        self._short.add(path)

    def _said(self, waiting: int, total: int, refused: dict[str, int]) -> str:
        if errno.ENFILE in refused.values():
            why, fix = "the system's open-file table is full", "raise fs.file-max with sysctl"
        elif self._limit is None:
            why, fix = "too many open files (the open-file limit, ulimit -n)", ULIMIT_FIX
        else:
            why = (
                f"too many open files (ulimit -n is {self._limit}; logwatch keeps "
                f"{self.reserve} of them for its state and connections)"
            )
            fix = ULIMIT_FIX
        return (
            f"{waiting} of {total} files cannot be opened now: {why}; following the other "
            f"{total - waiting} and opening the rest as descriptors free. Fix: {fix}"
        )

    def _detail(self) -> str:
        count = len(self.waiting)
        return f"{count} file{'' if count == 1 else 's'} still wait for a descriptor"


def _all_followed(episode: Episode, now_s: float) -> str:
    return (
        f"{KEY}: every file is followed now (some waited {episode.lasted(now_s)} for a descriptor)"
    )


def inotify_note(
    exc: OSError, poll_interval_s: float, descriptors: tuple[int, int] | None = None
) -> str:
    """The one line when file events cannot be had: which inotify limit, its value, the sysctl
    that raises it, and that tail polls instead. EMFILE is also this process's open-file limit
    when `descriptors` (limit, in use) shows it reached: then that is said, with its fix."""
    name = INOTIFY_LIMITS.get(exc.errno or 0)
    polling = f"polling every {poll_interval_s:g}s instead"
    if exc.errno == errno.EMFILE and descriptors is not None:
        limit, in_use = descriptors
        if in_use >= limit - 1:
            return (
                f"file events unavailable: too many open files (ulimit -n is {limit}); "
                f"{polling}. Fix: {ULIMIT_FIX}"
            )
    if name is None:
        return f"file events unavailable ({exc.strerror or exc}); {polling}"
    setting = f"fs.inotify.{name}"
    try:
        with open(f"/proc/sys/fs/inotify/{name}", encoding="ascii") as file:
            now = f" = {int(file.read().strip())}"
    except (OSError, ValueError):
        now = ""
    return (
        f"file events unavailable: inotify's limit {setting}{now} is reached; {polling}. "
        f"Fix: sudo sysctl {setting}=524288 (and a line `{setting} = 524288` in "
        "/etc/sysctl.d/ to keep it)"
    )
