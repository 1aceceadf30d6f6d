"""The state directory under failure and attack: writes that fail (removed directory, EMFILE,
ENOSPC, EROFS, a wrong-typed checkpoint) never stop alerts; modes are private; a directory with
planted symlinks or owned by another user is refused."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

from logwatch.drivers.checkpoint import StateDir
from logwatch.rules.loader import load_pack
from logwatch.testing import FailingStateFS, running
from tests.drivers.test_tail_cli import PACK, Tailer, alert_lines
from tests.support.paths import ROOT
from tests.support.tailkit import Tail, wait_until


def _append(log: Path, data: bytes) -> None:
    with open(log, "ab") as out:
        out.write(data)


def _removed(path: Path) -> bool:
    shutil.rmtree(path, ignore_errors=True)
    return not path.exists()


def test_state_dir_removed_while_running_keeps_alerting(tmp_path: Path) -> None:
    """The state directory removed under a running tail: alerts still print, the failure is
    said once with its fix, and SIGTERM still exits 0."""
    log = tmp_path / "a.log"
    log.write_bytes(b"")
    tail = Tailer(tmp_path)
    tail.ready()
    _append(log, alert_lines(1, 10))
    wait_until(lambda: len(tail.seqs()) == 10)
    # The running tail may write its checkpoint while the tree goes: remove until it is gone.
    wait_until(lambda: _removed(tmp_path / "state"))
    _append(log, alert_lines(11, 20))
    wait_until(lambda: len(tail.seqs()) == 20)
    wait_until(lambda: any("cannot write" in line for line in tail.err))
    _append(log, alert_lines(21, 30))
    wait_until(lambda: len(tail.seqs()) == 30)
    assert tail.finish() == 0
    said = [line for line in tail.err if "cannot write" in line]
    assert len(said) == 1 and "alerts still print" in said[0] and "--state-dir" in said[0]
    assert tail.seqs() == list(range(1, 31))


def test_wrong_typed_checkpoint_field_is_set_aside_not_a_crash_loop(tmp_path: Path) -> None:
    """A checkpoint that is valid JSON with a wrong-typed field is set aside with a message;
    tail starts, alerts and exits 0 (twice in a row: no crash loop)."""
    log = tmp_path / "a.log"
    log.write_bytes(alert_lines(1, 3))
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    st = log.stat()
    entry = {"source": str(log), "path": str(log), "dev": st.st_dev, "ino": st.st_ino}
    entry |= {"prefix_len": 2**70, "prefix_sha": "x", "offset": 0, "line": 1}
    entry |= {"evaluated_end": None, "generation": 0}
    bad = {"version": 1, "files": [entry], "sources": {}, "extras": {}}
    (state / "checkpoint.json").write_text(json.dumps(bad))
    for _ in range(2):
        tail = Tailer(tmp_path, "--from-beginning")
        tail.ready()
        wait_until(lambda t=tail: len(t.seqs()) >= 3 or t.proc.poll() is not None)  # type: ignore[misc]
        assert tail.finish() == 0, "".join(tail.err)
        (state / "checkpoint.json").write_text(json.dumps(bad))
    assert any("corrupt checkpoint" in line for line in tail.err)


EMFILE_SCRIPT = """
import resource, sys
from logwatch.cli import cli
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
sys.exit(cli.main(sys.argv[1:], prog_name="logwatch"))
"""


def test_too_many_open_files_keeps_alerting(tmp_path: Path) -> None:
    """With RLIMIT_NOFILE 64 and 100 files followed, tail keeps printing alerts and exits 0."""
    for i in range(100):
        (tmp_path / f"f{i:03}.log").write_bytes(b"")
    (tmp_path / "pack.toml").write_text(PACK, encoding="utf-8")
    args = [str(tmp_path / "*.log"), "--format", "jsonl", "--no-builtin-rules", "--gpu", "off"]
    args += ["--rules", str(tmp_path / "pack.toml"), "--state-dir", str(tmp_path / "state")]
    out_path, err_path = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", EMFILE_SCRIPT, "tail", *args], cwd=ROOT, stdout=out, stderr=err
        )
        try:
            wait_until(lambda: b"logwatch:" in err_path.read_bytes() or proc.poll() is not None)
            _append(tmp_path / "f000.log", alert_lines(1, 5))
            wait_until(lambda: out_path.read_bytes().count(b"\n") >= 5 or proc.poll() is not None)
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
    assert code == 0, err_path.read_text()
    assert out_path.read_bytes().count(b"\n") == 5


def _tail_on(tmp_path: Path, fs: FailingStateFS) -> Tail:
    (tmp_path / "pack.toml").write_text(PACK, encoding="utf-8")
    tail = Tail(tmp_path, rules=load_pack(tmp_path / "pack.toml"))
    assert tail.driver.state is not None
    tail.driver.state = StateDir(tail.driver.state.path, tail.status.append, fs=fs)
    return tail


def test_enospc_and_erofs_keep_alerting_in_memory_and_retry(tmp_path: Path) -> None:
    """Checkpoint and journal writes failing with ENOSPC, then EROFS: every alert is still
    emitted, the failure is said once per cause with its fix, and once writes work again the
    checkpoint is written and a restart resumes from it."""
    log = tmp_path / "a.log"
    log.write_bytes(b"")
    fs = FailingStateFS()
    tail = _tail_on(tmp_path, fs)
    with running(tail.driver) as driver:
        for n, err in enumerate((errno.ENOSPC, errno.EROFS)):
            fs.fail = err
            _append(log, alert_lines(10 * n + 1, 10 * n + 10))
            driver.sync()
            tail.clock.advance(2.0)
            driver.sync()
        fs.fail = None
        tail.clock.advance(2.0)
        driver.sync()
        tail.clock.advance(2.0)
        driver.sync()
    assert [line for line, _, _ in tail.alerts()] == list(range(1, 21))
    said = [m for m in tail.status if "cannot write" in m]
    assert len(said) == 2, tail.status
    assert "No space left on device" in said[0] and "Read-only file system" in said[1]
    assert "alerts still print" in said[0] and "--state-dir" in said[0]
    saved = json.loads((tmp_path / "state" / "checkpoint.json").read_text())
    assert saved["files"][0]["line"] == 21


def test_state_files_are_private(tmp_path: Path) -> None:
    """After a tail run the state directory is 0700 and every file in it 0600."""
    log = tmp_path / "a.log"
    log.write_bytes(b"")
    tail = Tailer(tmp_path)
    tail.ready()
    _append(log, alert_lines(1, 3))
    wait_until(lambda: len(tail.seqs()) == 3)
    assert tail.finish() == 0
    state = tmp_path / "state"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    for path in state.rglob("*"):
        want = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.lstat().st_mode) == want, path


def test_planted_symlinks_are_refused_and_victims_untouched(tmp_path: Path) -> None:
    """A state directory holding symlinks (lock -> a victim file, silences.json -> a file with
    a silence) is refused with exit 2 naming the path; the victim keeps its content."""
    log = tmp_path / "a.log"
    log.write_bytes(alert_lines(1, 2))
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    silences = tmp_path / "silences-elsewhere.json"
    silences.write_text("[]")
    os.symlink(victim, state / "lock")
    os.symlink(silences, state / "silences.json")
    tail = Tailer(tmp_path)
    code = tail.proc.wait(timeout=30)
    tail.finish()
    assert code == 2
    err = "".join(tail.err)
    assert "symlink" in err and str(state) in err and err.count("\n") == 1, err
    assert victim.read_bytes() == b"precious\n"
    assert tail.seqs() == []


def test_state_dir_of_another_user_is_refused(tmp_path: Path) -> None:
    """A state directory owned by another user (uid 65534) is refused with exit 2 and a fix."""
    (tmp_path / "a.log").write_bytes(b"")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, 65534, 65534)
    tail = Tailer(tmp_path)
    code = tail.proc.wait(timeout=30)
    tail.finish()
    assert code == 2
    err = "".join(tail.err)
    assert str(state) in err and "owned by uid 65534" in err, err
