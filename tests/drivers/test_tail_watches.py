"""Two terminals, two watches: without --state-dir each watched set has its own state directory
(`logwatch.statekey`), so `tail a.log` and `tail b.log` (or `top b.log`) run side by side; a
second watch of the same files is refused before the banner; an older logwatch's single state
directory is taken over file by file; a restart says what is still firing. Real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from logwatch.statekey import watch_key, watch_state_dir
from tests.support.paths import ROOT
from tests.support.process import Collected
from tests.support.tailkit import wait_until

WHY = ("--comment", "known")


def _line(step: int, loss: str) -> str:
    """A step line stamped now (local time, as a training script writes it)."""
    now = datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    return f"{now} INFO [train] step {step}/1000 | loss {loss} | lr 2.40e-05\n"


def _write(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(text)


@pytest.fixture
def xdg(tmp_path: Path) -> dict[str, str]:
    """The environment of a user whose default state root is tmp_path/xdg/logwatch."""
    return {"XDG_STATE_HOME": str(tmp_path / "xdg")}


@pytest.fixture
def logs(tmp_path: Path) -> tuple[Path, Path]:
    """a.log and b.log with one step line each."""
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(_line(1, "2.0"))
    b.write_text(_line(1, "2.0"))
    return a, b


def _tail(env: dict[str, str], *args: str) -> Collected:
    return Collected(["tail", *args, "--gpu", "off"], env=env)


@pytest.fixture
def started(xdg: dict[str, str]) -> Iterator[list[Collected]]:
    """Processes a test starts; each stopped at the end."""
    procs: list[Collected] = []
    yield procs
    for proc in procs:
        proc.stop()


def test_the_key_is_the_resolved_patterns() -> None:
    """Same files from another directory or in another order: one key; other files: another."""
    key = watch_key(["a.log", "logs/*.log"], cwd="/runs")
    assert key == watch_key(["/runs/logs/*.log", "../runs/a.log"], cwd="/runs")
    assert key.startswith("a.log+1-") and key != watch_key(["a.log"], cwd="/runs")
    assert watch_key(["b.log"], cwd="/runs") != watch_key(["a.log"], cwd="/runs")


def test_two_tails_of_different_files_both_run_and_alert(
    tmp_path: Path, xdg: dict[str, str], logs: tuple[Path, Path], started: list[Collected]
) -> None:
    """`tail a.log` and `tail b.log` at once, no flag: both follow, both alert on their own
    file, each state in its own directory under ROOT/watch with its own checkpoint."""
    a, b = logs
    started += [_tail(xdg, str(a)), _tail(xdg, str(b))]
    for proc in started:
        wait_until(lambda p=proc: p.said("following it"), 60.0)
    _write(a, _line(2, "nan"))
    _write(b, _line(2, "nan"))
    for proc, name in zip(started, ("a.log", "b.log"), strict=True):
        wait_until(lambda p=proc: any("nan-loss" in line for line in p.out), 20.0)
        assert not proc.said("another logwatch"), proc.err
        assert all(name in line for line in proc.out if "nan-loss" in line)
    assert [proc.stop(signal.SIGINT) for proc in started] == [0, 0]
    root = tmp_path / "xdg" / "logwatch"
    for log in (a, b):
        state = watch_state_dir(root, [str(log)])
        (entry,) = json.loads((state / "checkpoint.json").read_text())["files"]
        assert entry["path"] == str(log)
        assert json.loads((state / "watching.json").read_text()) == {"patterns": [str(log)]}


def test_top_of_other_files_runs_beside_a_tail(
    xdg: dict[str, str], logs: tuple[Path, Path], started: list[Collected]
) -> None:
    """`tail a.log` and `top b.log` (piped: status lines) at once: top prints b's status."""
    a, b = logs
    started.append(_tail(xdg, str(a)))
    wait_until(lambda: started[0].said("following it"), 60.0)
    started.append(Collected(["top", str(b), "--gpu", "off", "--interval", "1s"], env=xdg))
    wait_until(lambda: any(line.startswith(f"{b} ") for line in started[1].out), 60.0)
    assert not started[1].said("another logwatch")


def test_a_second_watch_of_the_same_files_is_refused_before_the_banner(
    tmp_path: Path, xdg: dict[str, str], logs: tuple[Path, Path], started: list[Collected]
) -> None:
    """`tail /abs/a.log` running; `tail a.log` from a.log's folder (the same file): exit 2 and
    one line, the pid and the fix, with no banner line before it."""
    a, _ = logs
    started.append(_tail(xdg, str(a)))
    wait_until(lambda: started[0].said("following it"), 60.0)
    second = subprocess.run(
        [sys.executable, "-m", "logwatch", "tail", "a.log", "--gpu", "off"],
        cwd=tmp_path,
        env={**os.environ, **xdg, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    state = watch_state_dir(tmp_path / "xdg" / "logwatch", [str(a)])
    assert second.returncode == 2
    assert second.stderr == (
        f"Error: {state}: another logwatch (pid {started[0].proc.pid}) already watches the same "
        "files (this state directory is theirs); stop it, or give this one its own --state-dir\n"
    )


def test_an_older_single_state_directory_is_taken_over_file_by_file(
    tmp_path: Path, xdg: dict[str, str], logs: tuple[Path, Path]
) -> None:
    """An older logwatch kept both files' checkpoint in ROOT: `tail a.log` takes a's entry
    (says so, resumes a where it was, reads nothing twice), leaves b's; `tail b.log` takes
    b's; nothing is caught up again."""
    a, b = logs
    root = tmp_path / "xdg" / "logwatch"
    old = _tail(xdg, str(tmp_path / "*.log"), "--state-dir", str(root))
    wait_until(lambda: sum("following it" in line for line in old.err) == 2, 60.0)
    assert old.stop() == 0
    _write(a, _line(2, "nan"))  # written while nothing ran: read once, on resume
    first = _tail(xdg, str(a))
    wait_until(lambda: first.said("resuming at line 2 (checkpoint)"), 60.0)
    wait_until(lambda: any("nan-loss" in line for line in first.out), 20.0)
    assert first.stop() == 0
    took = [line for line in first.err if "took over" in line]
    assert took == [
        f"logwatch: took over the checkpoint of 1 file from {root} (older logwatch kept all "
        f"state there); this watch's state is now {watch_state_dir(root, [str(a)])}\n"
    ]
    assert not first.said("caught up")
    (left,) = json.loads((root / "checkpoint.json").read_text())["files"]
    assert left["path"] == str(b)
    second = _tail(xdg, str(b))
    wait_until(lambda: second.said("resuming at line 2 (checkpoint)"), 60.0)
    assert second.stop() == 0 and second.said("took over the checkpoint of 1 file")
    assert json.loads((root / "checkpoint.json").read_text())["files"] == []


def test_a_silence_added_without_state_dir_mutes_a_watch(
    tmp_path: Path, xdg: dict[str, str], logs: tuple[Path, Path], started: list[Collected]
) -> None:
    """`logwatch silence add nan-loss` (default state) applies to `tail a.log`, whose state
    lives under ROOT/watch: its NaN is printed as (silenced)."""
    a, _ = logs
    added = subprocess.run(
        [sys.executable, "-m", "logwatch", "silence", "add", "nan-loss", "--for", "1h", *WHY],
        cwd=ROOT,
        env={**os.environ, **xdg},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert added.returncode == 0, added.stderr
    started.append(_tail(xdg, str(a)))
    wait_until(lambda: started[0].said("following it"), 60.0)
    _write(a, _line(2, "nan"))
    wait_until(lambda: any("nan-loss" in line for line in started[0].out), 20.0)
    assert any("(silenced)" in line for line in started[0].out if "nan-loss" in line)


def test_a_restart_says_what_is_still_firing(
    tmp_path: Path, xdg: dict[str, str], logs: tuple[Path, Path]
) -> None:
    """A NaN at line 6, Ctrl-C (SIGINT), start again: `resuming at line 7`, then one line
    `still firing: nan-loss since line 6 (N s)` (N: seconds since that line was written)."""
    a, _ = logs
    _write(a, "".join(_line(step, "1.5") for step in range(2, 6)))
    first = _tail(xdg, str(a))
    wait_until(lambda: first.said("following it"), 60.0)
    _write(a, _line(6, "nan"))
    wait_until(lambda: any("nan-loss" in line for line in first.out), 20.0)
    assert first.stop(signal.SIGINT) == 0
    second = _tail(xdg, str(a))
    try:
        wait_until(lambda: second.said("still firing"), 60.0)
    finally:
        assert second.stop(signal.SIGINT) == 0
    resumed = [line for line in second.err if line.startswith(f"logwatch: {a}: ")]
    assert resumed[0] == f"logwatch: {a}: resuming at line 7 (checkpoint)\n"
    prefix = f"logwatch: {a}: still firing: nan-loss since line 6 ("
    assert resumed[1].startswith(prefix) and resumed[1].endswith(" s)\n"), resumed
    assert int(resumed[1][len(prefix) : -len(" s)\n")]) < 60
    assert not any("nan-loss" in line for line in second.out)  # said, not alerted again


def test_top_of_the_files_a_tail_watches_is_refused_before_it_says_anything(
    tmp_path: Path, xdg: dict[str, str], logs: tuple[Path, Path], started: list[Collected]
) -> None:
    """`tail a.log` running; `top a.log`: exit 2 with the one refusal line (no GPU line, no
    catch-up line before it)."""
    a, _ = logs
    started.append(_tail(xdg, str(a)))
    wait_until(lambda: started[0].said("following it"), 60.0)
    second = subprocess.run(
        [sys.executable, "-m", "logwatch", "top", str(a), "--gpu", "off"],
        cwd=ROOT,
        env={**os.environ, **xdg},
        capture_output=True,
        text=True,
        timeout=60,
    )
    state = watch_state_dir(tmp_path / "xdg" / "logwatch", [str(a)])
    assert (second.returncode, second.stdout) == (2, "")
    assert second.stderr == (
        f"Error: {state}: another logwatch (pid {started[0].proc.pid}) already watches the same "
        "files (this state directory is theirs); stop it, or give this one its own --state-dir\n"
    )


def test_the_first_watch_to_take_over_also_takes_the_sinks_state(
    tmp_path: Path, logs: tuple[Path, Path]
) -> None:
    """An older ROOT with a checkpoint of a.log and b.log, Slack's outbox and Alertmanager's
    state: the watch of a.log takes a's entry (its engine state with it), the journal of emitted
    alerts and the sinks' files; b's entry stays in ROOT."""
    from logwatch.drivers.adopt import adopt_legacy_state
    from logwatch.drivers.checkpoint import StateDir
    from logwatch.drivers.checkpoint_record import Checkpoint
    from logwatch.sources.follow import Position

    a, b = logs
    root, said = tmp_path / "root", []
    old = StateDir(root, said.append)
    old.open()
    files = [Position(str(p), str(p), p.stat().st_dev, p.stat().st_ino, 0, "", 0, 2) for p in logs]
    assert old.save(Checkpoint(files, {str(a): {"a": 1}, str(b): {"b": 2}}, {"gpu": {"x": 1}}))
    old.record_emitted("gen|a.log|2|fp|firing")
    old.close()
    (root / "slack-spool.jsonl").write_text('{"op":"job"}\n')
    (root / "alertmanager.json").write_text("{}")
    target = tmp_path / "watch"
    adopt_legacy_state(root, target, [str(a)], said.append)
    mine = StateDir(target, said.append)
    taken = mine.load()
    assert taken is not None and [p.path for p in taken.files] == [str(a)]
    assert taken.sources == {str(a): {"a": 1}} and taken.extras == {"gpu": {"x": 1}}
    assert mine.emitted() == {"gen|a.log|2|fp|firing"}
    assert (target / "slack-spool.jsonl").read_text() == '{"op":"job"}\n'
    assert (target / "alertmanager.json").is_file() and not (root / "alertmanager.json").exists()
    rest = StateDir(root, said.append).load()
    assert rest is not None and [p.path for p in rest.files] == [str(b)]
    assert said[-1].startswith(
        "took over the checkpoint of 1 file and the sinks' state (slack-spool.jsonl, "
        "alertmanager.json) from "
    )


def test_silences_of_a_watch_are_the_roots_and_an_explicit_state_dir_keeps_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ROOT/watch/KEY reads ROOT's silences (even before its watching.json is written); a
    --state-dir that merely looks like one (/srv/watch/x, no watching.json) keeps its own."""
    from logwatch.statekey import silences_home

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    root = tmp_path / "logwatch"
    assert silences_home(watch_state_dir(root, ["a.log"])) == root
    assert silences_home(tmp_path / "srv" / "watch" / "x") == tmp_path / "srv" / "watch" / "x"
    assert silences_home(tmp_path / "mine") == tmp_path / "mine"
