"""Keys for `logwatch top`: the terminal in cbreak mode (restored on every exit path) and a
reader thread turning bytes into key names. No timeout polling: a self-pipe ends the wait."""

from __future__ import annotations

import os
import select
import termios
import threading
import tty
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SEQUENCES = {
    b"\x1b[A": "up",
    b"\x1b[B": "down",
    b"\x1bOA": "up",
    b"\x1bOB": "down",
    b"\x1b[C": "right",
    b"\x1b[D": "left",
    b"\r": "enter",
    b"\n": "enter",
    b"\x7f": "backspace",
    b"\x08": "backspace",
}


def key_names(data: bytes) -> list[str]:
    """The keys in what one read returned: escape sequences by name, other bytes as text."""
    keys: list[str] = []
    i = 0
    while i < len(data):
        for seq, name in SEQUENCES.items():
            if data.startswith(seq, i):
                keys.append(name)
                i += len(seq)
                break
        else:
            if data[i : i + 1] == b"\x1b":
                keys.append("escape")
                i += 3 if data[i + 1 : i + 2] in (b"[", b"O") else 1  # an unknown sequence
                continue
            end = i + 1
            while end < len(data) and (data[end] & 0xC0) == 0x80:  # the rest of a UTF-8 char
                end += 1
            keys.append(data[i:end].decode("utf-8", "replace"))
            i = end
    return keys


@contextmanager
def cbreak(fd: int) -> Iterator[None]:
    """Keys without Enter, no echo, Ctrl-C still a SIGINT; the old mode back however it ends."""
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd, termios.TCSANOW)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


class KeyReader:
    """Reads `fd` on a daemon thread and calls `on_key(name)` for each key."""

    def __init__(self, fd: int, on_key: Callable[[str], None]) -> None:
        self.fd, self.on_key = fd, on_key
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="logwatch-top-keys", daemon=True)

    def start(self) -> None:
        """Start reading."""
        self._thread.start()

    def _run(self) -> None:
        while True:
            ready, _, _ = select.select([self.fd, self._stop_r], [], [])
            if self._stop_r in ready:
                return
            try:
                data = os.read(self.fd, 64)
            except OSError:
                return  # the terminal went away (tmux pane killed): nothing more to read
            if not data:
                return
            for key in key_names(data):
                self.on_key(key)

    def close(self) -> None:
        """Stop the thread and release the pipe."""
        os.write(self._stop_w, b"x")
        if self._thread.is_alive():
            self._thread.join(1.0)
        os.close(self._stop_r)
        os.close(self._stop_w)
