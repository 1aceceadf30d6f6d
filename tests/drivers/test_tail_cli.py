"""`logwatch tail` as a process: signals, kill -9, a second process, bad options."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.testing import running
from tests.support.process import Collected
from tests.support.tailkit import Tail, wait_until

PACK = """
[[rule]]
id = "each-line"
type = "match"
severity = "info"
pattern = 'seq=(?P<seq>\\d+) ALERT'
summary = "{text} at line {line}"
"""


def alert_lines(first: int, last: int) -> bytes:
    """Lines that each fire one `each-line` alert, labelled with their seq number."""
    return "".join(f"seq={i} ALERT\n" for i in range(first, last + 1)).encode()


class Tailer(Collected):
    """`python -m logwatch tail` in a subprocess, its stdout and stderr collected."""

    def __init__(
        self,
        folder: Path,
        *extra: str,
        prefix: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        pack = folder / "pack.toml"
        pack.write_text(PACK, encoding="utf-8")
        args = [str(folder / "*.log"), "--format", "jsonl", "--no-builtin-rules", "--gpu", "off"]
        args += ["--rules", str(pack), "--state-dir", str(folder / "state"), *extra]
        super().__init__(["tail", *args], prefix=prefix, env=env)
        self._seqs: list[int] = []

    def seqs(self) -> list[int]:
        """The seq labels of the alerts printed so far (each line parsed once: the tests poll
        this every 5 ms while thousands of alerts arrive, on the cores the tail needs)."""
        for line in self.out[len(self._seqs) :]:
            self._seqs.append(int(json.loads(line)["labels"]["seq"]))
        return list(self._seqs)

    def ready(self) -> None:
        """Wait until the process follows its file (its history caught up: what is written
        from now on is read live)."""
        wait_until(lambda: any("following it" in line for line in self.err))

    def finish(self, sig: int = signal.SIGTERM) -> int:
        """Send a signal, wait for the exit code, close the pipes."""
        return self.stop(sig)


def test_sigterm_then_restart_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """SIGTERM mid-stream exits 0 after a checkpoint; the restarted process alerts on exactly
    the lines the first did not, so every line alerts exactly once. The first warms up, as a
    user's tail does (the suite's other tail processes do not: tests/conftest.py)."""
    log = tmp_path / "a.log"
    log.write_bytes(b"")
    first = Tailer(tmp_path, env={"LOGWATCH_WARM_UP": "1"})
    first.ready()
    with open(log, "ab", buffering=0) as out:
        out.write(alert_lines(1, 200))
        wait_until(lambda: len(first.seqs()) == 200)
        out.write(alert_lines(201, 260))
        assert first.finish() == 0
        out.write(alert_lines(261, 300))
    second = Tailer(tmp_path)
    wait_until(lambda: len(first.seqs()) + len(second.seqs()) >= 300)
    assert second.finish(signal.SIGINT) == 0
    assert sorted(first.seqs() + second.seqs()) == list(range(1, 301))
    assert any("resuming at line" in line for line in second.err)


def test_kill_9_then_restart_loses_nothing_and_alerts_once(tmp_path: Path) -> None:
    """kill -9 while a writer appends: after a restart every line has alerted, and once (lines
    after the last checkpoint are read again, their alerts are not repeated), but for the one
    alert the kill may have caught printed and not yet journalled: that one shows again."""
    log = tmp_path / "a.log"
    log.write_bytes(b"")
    total = 6000
    first = Tailer(tmp_path)
    first.ready()

    def write() -> None:
        with open(log, "ab", buffering=0) as out:
            for start in range(1, total + 1, 10):
                out.write(alert_lines(start, start + 9))
                time.sleep(0.003)

    writer = threading.Thread(target=write)
    writer.start()
    wait_until(lambda: len(first.seqs()) >= 4000)  # past at least one periodic checkpoint
    first.finish(signal.SIGKILL)
    second = Tailer(tmp_path)
    writer.join()
    wait_until(lambda: len(set(first.seqs()) | set(second.seqs())) >= total, timeout_s=60)
    assert second.finish() == 0
    counts = Counter(first.seqs() + second.seqs())
    assert sorted(counts) == list(range(1, total + 1))
    assert {seq for seq, n in counts.items() if n > 1} <= {first.seqs()[-1]}
    assert max(counts.values()) <= 2


def test_a_second_process_on_the_same_state_dir_is_refused(tmp_path: Path) -> None:
    """The second `logwatch tail` on a state directory exits 2 and names the first one's pid."""
    (tmp_path / "a.log").write_bytes(b"")
    first = Tailer(tmp_path)
    first.ready()
    second = Tailer(tmp_path)
    code = second.proc.wait(timeout=30)
    second.finish()
    assert code == 2
    assert f"another logwatch (pid {first.proc.pid})" in "".join(second.err)
    assert first.finish() == 0


def test_after_a_crash_reread_lines_do_not_alert_again(tmp_path: Path) -> None:
    """A crash (no final checkpoint) makes the next run read lines again; the journal of emitted
    alerts keeps each of them from alerting twice, while new lines still alert."""
    log = tmp_path / "a.log"
    from logwatch.rules.loader import load_pack

    (tmp_path / "pack.toml").write_text(PACK, encoding="utf-8")
    rules = load_pack(tmp_path / "pack.toml")
    first = Tail(tmp_path, rules=rules)
    with first.driver as driver:
        log.write_bytes(alert_lines(1, 50))
        driver.poll_once()
        first.clock.advance(2.0)
        driver.poll_once()  # checkpoint after line 50
        with open(log, "ab") as out:
            out.write(alert_lines(51, 100))
        driver.poll_once()
        driver.close(checkpoint=False)  # the crash: nothing written at exit
    assert len(first.alerts()) == 100
    with open(log, "ab") as out:
        out.write(alert_lines(101, 120))
    second = Tail(tmp_path, rules=rules)
    with running(second.driver) as driver:
        driver.sync()
    assert second.seqs()[0] == 51  # read again from the checkpoint
    assert [line for line, _, _ in second.alerts()] == list(range(101, 121))


def test_from_beginning_and_from_end_exclude_each_other(tmp_path: Path) -> None:
    """Asking for both start positions is a usage error (exit 2) that says so."""
    result = CliRunner().invoke(
        cli, ["tail", str(tmp_path / "*.log"), "--from-beginning", "--from-end"]
    )
    assert result.exit_code == 2
    assert "exclude each other" in result.output


def test_a_bad_duration_names_the_option_and_the_accepted_form(tmp_path: Path) -> None:
    """--poll-interval 1x is refused with the units that work."""
    result = CliRunner().invoke(cli, ["tail", str(tmp_path / "*.log"), "--poll-interval", "1x"])
    assert result.exit_code == 2
    assert "--poll-interval" in result.output and "'30s'" in result.output


def test_a_directory_argument_is_refused_with_the_fix(tmp_path: Path) -> None:
    """`logwatch tail DIR` says to give the log files in it."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "xdg")}
    result = CliRunner().invoke(cli, ["tail", str(tmp_path)], env=env)
    assert result.exit_code == 2
    assert f"{tmp_path}: is a directory" in result.output
