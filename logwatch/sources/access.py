"""Why this process may not read a path, and the command that would let it.

A log written by another user (mode 600, a folder at 700) is the usual reason tail cannot open
a file; the note names the user logwatch runs as, the first folder it may not search (else the
file, or the folder to list) and the `chmod` that lets it in.
"""

from __future__ import annotations

import errno
import os
import pwd
import shlex
import stat
from pathlib import Path

DENIED = frozenset({errno.EACCES, errno.EPERM})
ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR})
"""stat() errors that mean a path is not there (yet): waited for without a word."""


def list_error(folder: Path) -> OSError | None:
    """Why `folder` cannot be listed (an `ABSENT` errno: it is not there, or no folder), or
    None when it can."""
    try:
        mode = os.stat(folder).st_mode
    except OSError as exc:
        return exc
    if not stat.S_ISDIR(mode):
        return NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(folder))
    if not os.access(folder, os.R_OK | os.X_OK):  # glob would find nothing, without a word
        return PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(folder))
    return None


def access_fix(path: str, exc: OSError, *, listing: bool = False) -> str:
    """For a permission failure on `path` (a folder to list, when `listing`): the user logwatch
    runs as and the `chmod` that lets it in, as a clause to append; '' for other failures."""
    if exc.errno not in DENIED:
        return ""
    user = f"as user {_user()}"
    alternative = "or run logwatch as a user that may read it"
    for folder in list(Path(os.path.abspath(path)).parents)[::-1]:  # "/" first
        if not os.access(folder, os.X_OK):
            chmod = _chmod(str(folder), "x")
            return f" {user}, which may not search {folder}; fix: {chmod} ({alternative})"
    return f" {user}; fix: {_chmod(path, 'rx' if listing else 'r')} ({alternative})"


def _chmod(target: str, bits: str) -> str:
    """The `chmod` that grants `bits` on `target` to the class this process falls in."""
    return f"chmod {_class_of(target)}+{bits} {shlex.quote(target)}"


def _class_of(target: str) -> str:
    """Which of the owner / group / other bits apply to this process for `target`."""
    try:
        st = os.stat(target)
    except OSError:
        return "o"
    if st.st_uid == os.geteuid():
        return "u"
    return "g" if st.st_gid in {os.getegid(), *os.getgroups()} else "o"


def _user() -> str:
    """The name of the user this process runs as (its uid when it has no name)."""
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
