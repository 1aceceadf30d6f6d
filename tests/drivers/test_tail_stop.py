"""`TailDriver.stop()` from a signal handler: it never waits on a lock the interrupted thread
holds (a SIGTERM that lands while the driver's thread waits between rounds)."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.support.tailkit import Tail


def test_stop_returns_while_its_own_thread_holds_the_wake_lock(tmp_path: Path) -> None:
    """A signal handler runs on the thread it interrupts. Interrupted inside the wake event's
    `wait`, that thread holds the event's lock: `stop()` must not take it (it used to, and
    `logwatch tail` then never exited on SIGTERM), and `run()` still ends promptly."""
    tail = Tail(tmp_path, state=False)
    driver = tail.driver
    driver.open()
    finished = threading.Event()

    def interrupted() -> None:
        with driver._wake._cond:  # where a signal handler finds the thread inside wait()
            driver.stop()
        finished.set()

    caller = threading.Thread(target=interrupted, daemon=True)
    caller.start()
    caller.join(timeout=10)
    try:
        assert finished.is_set(), "stop() waited for the lock its own thread holds"
        runner = threading.Thread(target=driver.run, daemon=True)
        runner.start()
        runner.join(timeout=10)
        assert not runner.is_alive(), "run() did not end after stop()"
    finally:
        driver.close(checkpoint=False)
