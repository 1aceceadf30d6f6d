"""Silences: time-bounded mutes by rule and source glob, kept in the state directory.

A running process re-reads the file whenever it changes (size or mtime), so `logwatch silence add`
takes effect without a restart; an expired silence simply stops matching.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from logwatch.atomic import open_private, write_atomic
from logwatch.errors import SilenceError, SilencesUnreadable
from logwatch.redact import stderr_line
from logwatch.statekey import silences_home

FILE = "silences.json"


@dataclass(frozen=True, slots=True)
class Silence:
    """Mute alerts of `rule` (a glob) on sources matching `source` (a glob) until `ends`."""

    id: str
    rule: str
    source: str
    starts: datetime
    ends: datetime
    comment: str
    author: str = ""
    notice: str = ""
    """A Slack message's group (its id) whose resolve ends it ("Silence until resolved")."""

    def active(self, now: datetime) -> bool:
        """Whether it mutes at `now`."""
        return self.starts <= now < self.ends

    def matches(self, rule: str, source: str) -> bool:
        """Whether it covers this alert."""
        return fnmatchcase(rule, self.rule) and fnmatchcase(source, self.source)

    def to_json(self) -> dict[str, Any]:
        """As stored."""
        data = asdict(self)
        data["starts"], data["ends"] = self.starts.isoformat(), self.ends.isoformat()
        return data


class SilenceStore:
    """The silences file of one state directory."""

    def __init__(self, directory: Path, *, report: Callable[[str], None] = stderr_line) -> None:
        self.path, self.report = silences_home(directory) / FILE, report
        self._stamp: tuple[int, int, int] | None = None
        self._cache: list[Silence] = []
        self._reported: tuple[tuple[int, int, int] | None, str] | None = None

    def all(self) -> list[Silence]:
        """Every stored silence, re-read if the file changed since the last call."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._cache = None, []
            return []
        except OSError as exc:
            raise self._unusable("read", exc) from None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self._cache, self._stamp = self._read(stamp), stamp
        return list(self._cache)

    def _read(self, stamp: tuple[int, int, int]) -> list[Silence]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise self._unusable("read", exc) from None
        try:
            return [_silence(item) for item in json.loads(text or "[]")]
        except (ValueError, TypeError, KeyError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            raise SilencesUnreadable(
                f"{self.path}: broken silences file ({reason}); fix or delete it", reason, stamp
            ) from None

    def muting(self, rule: str, source: str, now: datetime) -> Silence | None:
        """The active silence covering this alert, if any. A file that cannot be read mutes
        nothing: said once per change of the file, so alerts keep flowing until it is fixed."""
        try:
            silences = self.all()
        except SilencesUnreadable as exc:
            self._report_once(exc.stamp, exc.reason)
            return None
        self._reported = None
        for silence in silences:
            if silence.active(now) and silence.matches(rule, source):
                return silence
        return None

    def _report_once(self, stamp: tuple[int, int, int] | None, reason: str) -> None:
        if self._reported == (stamp, reason):
            return
        self._reported = (stamp, reason)
        self.report(
            f"{self.path}: cannot read silences: {reason}; "
            "alerts are not silenced until it is fixed"
        )

    def add(
        self,
        rule: str,
        source: str,
        duration_s: float,
        comment: str,
        now: datetime,
        *,
        author: str | None = None,
        notice: str = "",
    ) -> Silence:
        """Store a new silence starting now (by `author`, default $USER; `notice`: it also ends
        when that Slack message's alerts resolve)."""
        silence = Silence(
            id=secrets.token_hex(4),
            rule=rule,
            source=source,
            starts=now,
            ends=now + timedelta(seconds=duration_s),
            comment=comment,
            author=os.environ.get("USER", "") if author is None else author,
            notice=notice,
        )
        self._update(lambda items: [*items, silence])
        return silence

    def end_for_notice(self, notice: str, now: datetime) -> None:
        """End now the silences that last until this Slack message's alerts resolve."""
        if not any(s.notice == notice and s.active(now) for s in self.all()):
            return
        self._update(
            lambda items: [
                Silence(**{**asdict(s), "ends": min(s.ends, now)}) if s.notice == notice else s
                for s in items
            ]
        )

    def expire(self, silence_id: str, now: datetime) -> Silence:
        """End a silence now."""
        found = [s for s in self.all() if s.id == silence_id]
        if not found:
            known = ", ".join(s.id for s in self.all()) or "none"
            raise SilenceError(f"no silence with id {silence_id!r} in {self.path} (known: {known})")
        ended = Silence(**{**asdict(found[0]), "ends": min(found[0].ends, now)})
        self._update(lambda items: [ended if s.id == silence_id else s for s in items])
        return ended

    def _update(self, change: Any) -> None:
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open_private(self.path.with_suffix(".lock")) as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                self._stamp = None
                items = change(self.all())
                data = json.dumps([s.to_json() for s in items], indent=1).encode()
                write_atomic(self.path, data)
        except OSError as exc:
            raise self._unusable("write", exc) from None

    def _unusable(self, action: str, exc: OSError) -> SilencesUnreadable:
        folder = self.path.parent
        why = (
            "not a directory"
            if folder.exists() and not folder.is_dir()
            else f"{exc.filename or self.path}: {exc.strerror or exc}"
        )
        return SilencesUnreadable(
            f"cannot {action} silences in {folder} ({why}); "
            f"give --state-dir a directory you can {action} (or none for the default)",
            why,
            None,
        )


def _silence(item: Any) -> Silence:
    """One stored silence; TypeError / KeyError / ValueError when it is not one."""
    if not isinstance(item, dict):
        raise TypeError(f"a silence must be an object, got {json.dumps(item)[:40]}")
    text = ("id", "rule", "source", "comment", "author", "notice")
    bad = [key for key in text if key in item and not isinstance(item[key], str)]
    if bad:
        raise TypeError(f"silence field {bad[0]!r} must be a string")
    starts, ends = item["starts"], item["ends"]
    if not isinstance(starts, str) or not isinstance(ends, str):
        raise TypeError("silence 'starts' and 'ends' must be ISO times")
    return Silence(
        **{**item, "starts": datetime.fromisoformat(starts), "ends": datetime.fromisoformat(ends)}
    )


def check_rule(rule: str, rule_ids: Iterable[str]) -> None:
    """SilenceError unless the glob `rule` matches one of the loaded rule ids (a typo would
    otherwise silence nothing, silently)."""
    known = sorted(set(rule_ids))
    if not any(fnmatchcase(rule_id, rule) for rule_id in known):
        raise SilenceError(
            f"no rule matches {rule!r} (known: {', '.join(known) or 'none'}); "
            "give a rule id or a glob such as 'gpu-*'"
        )
