"""The GPU side joined to `logwatch tail`: NVML diagnosis on log alerts, run-hung, NVML absent."""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from logwatch.alerts import AlertEvent
from logwatch.gpu.link import GpuLink
from logwatch.gpu.model import GpuSettings
from logwatch.gpu.sampler import start_gpu
from logwatch.rules.loader import builtin_rules_dir, load_rules
from logwatch.testing import FakeClock, FakeGpuReader, running
from tests.fakenvml.build import compiler, write_control
from tests.support.paths import ROOT, SAMPLES
from tests.support.tailkit import Tail, wait_until

RULES = load_rules([builtin_rules_dir()])
SLAMMED4 = SAMPLES / "dflash" / "train_slammed4.log"


def linked_tail(
    folder: Path, reader: FakeGpuReader, clock: FakeClock, **options: object
) -> tuple[Tail, GpuLink]:
    """A tail driver over folder/*.log with the GPU side joined (sampler polled by hand)."""
    started = start_gpu(GpuSettings.parse("auto", "5s"), reader, clock=clock, run=False)
    link = GpuLink(started, RULES, clock=clock)
    return Tail(folder, rules=RULES, clock=clock, plugins=[link], **options), link


def test_slammed4_story_on_a_host_whose_nvml_works(tmp_path: Path) -> None:
    """Caught up on train_slammed4.log with NVML working here: one enriched nvml-disabled with
    the fix and the cost of restarting; gpu-metrics-missing is the same news and stays quiet."""
    shutil.copy(SLAMMED4, tmp_path / "train.log")
    clock = FakeClock(start=datetime(2026, 11, 28, 16, 30, 0))
    tail, link = linked_tail(tmp_path, FakeGpuReader(count=8), clock)
    with running(tail.driver) as driver:
        driver.sync()
    assert tail.alerts() == [(3, "nvml-disabled", "firing")]
    [alert] = tail.sink.events
    assert "NVML works here: 8x NVIDIA H200, driver 580.65.06" in alert.summary
    assert "lacks nvidia-ml-py" in alert.summary
    assert "uv pip install nvidia-ml-py" in alert.fix
    assert "is at step 600" in alert.fix and "has been going 2h" in alert.fix
    link.close()


def quiet_run(
    tmp_path: Path, reader: FakeGpuReader, until_rule: str, clock: FakeClock | None = None
) -> list[AlertEvent]:
    """One step line, then 15 minutes of wall time without lines, one NVML round per 30 s;
    returns the alerts once `until_rule` has fired."""
    log = tmp_path / "train.log"
    log.write_bytes(b"")
    clock = clock or FakeClock()
    tail, link = linked_tail(tmp_path, reader, clock, poll_interval_s=0.05)
    sampler = link.started.sampler
    assert sampler is not None
    with running(tail.driver) as driver:
        with open(log, "ab") as out:
            out.write(b"2026-11-28 14:00:00,000 INFO [train] step 10 | loss 2.0\n")
        driver.sync()
        for _ in range(30):
            clock.advance(30)
            sampler.poll()
            driver.sync()  # a round of the driver sees this NVML round
        wait_until(lambda: until_rule in [e.rule for e in tail.sink.events])
        driver.sync()  # anything else this round would say
    link.close()
    return tail.sink.events


def test_hung_run_through_the_driver(tmp_path: Path) -> None:
    """Log stalled past stall_after and the run's GPUs idle: log-stalled, then run-hung."""
    reader = FakeGpuReader(count=2)
    reader.set_all(util_gpu=1.0)
    events = quiet_run(tmp_path, reader, "run-hung")
    rules = [(e.rule, e.status) for e in events if e.rule != "gpu-idle"]
    assert rules == [("log-stalled", "firing"), ("run-hung", "firing")]
    idle = [(e.status, e.labels["gpu"]) for e in events if e.rule == "gpu-idle"]
    # Idle GPUs under a log not yet called stalled warn first; once the log is stalled the
    # hang is one run-hung, not per-GPU idleness.
    assert sorted(idle) == [("firing", "0"), ("firing", "1"), ("resolved", "0"), ("resolved", "1")]
    hung = next(e for e in events if e.rule == "run-hung")
    assert hung.severity.label == "critical"
    assert hung.ts is not None and hung.ts >= datetime(2026, 11, 28, 14, 10)


def test_gpu_alerts_are_not_repeated_after_a_restart(tmp_path: Path) -> None:
    """A tail stopped while run-hung fires and started again on the same state directory says
    nothing new: the GPU rules' state and their firing alerts are checkpointed too."""
    reader = FakeGpuReader(count=2)
    reader.set_all(util_gpu=1.0)
    clock = FakeClock()
    first = quiet_run(tmp_path, reader, "run-hung", clock)
    assert "run-hung" in [e.rule for e in first]
    tail, link = linked_tail(tmp_path, reader, clock, poll_interval_s=0.05)
    sampler = link.started.sampler
    assert sampler is not None
    with running(tail.driver) as driver:
        for _ in range(10):
            clock.advance(30)
            sampler.poll()
            driver.sync()
    link.close()
    assert [(e.rule, e.status) for e in tail.sink.events] == []


def test_busy_but_quiet_run_is_only_stalled(tmp_path: Path) -> None:
    """Log stalled while the GPUs stay busy (a long eval): log-stalled only, no run-hung."""
    events = quiet_run(tmp_path, FakeGpuReader(count=2), "log-stalled")
    assert [e.rule for e in events] == ["log-stalled"]


# --- as a user runs it: real pynvml, a stand-in libnvidia-ml.so.1, a real process ---------

needs_cc = pytest.mark.skipif(
    compiler() is None, reason="no C compiler: cannot build the stand-in NVML"
)


def working_nvml(folder: Path, lib: Path) -> dict[str, str]:
    """An environment in which pynvml finds the stand-in library `lib`: 8 H200s, driver
    580.65.06."""
    control = folder / "nvml.ctl"
    write_control(control, {"driver": "580.65.06", "count": 8})
    return {**os.environ, "LD_LIBRARY_PATH": str(lib.parent), "FAKE_NVML_CONTROL": str(control)}


def run_tail(
    folder: Path, env: dict[str, str], *extra: str, wait_for: str
) -> tuple[int, list[dict], str]:
    """`logwatch tail folder/*.log --format jsonl`, stopped with SIGTERM once stderr says `wait_for`."""
    args = [
        str(folder / "*.log"),
        "--format",
        "jsonl",
        "--state-dir",
        str(folder / "state"),
        *extra,
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "logwatch.cli", "tail", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    err = ""
    assert proc.stderr is not None
    while wait_for not in err and proc.poll() is None and time.monotonic() < deadline:
        err += proc.stderr.readline()
    if proc.poll() is None:
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
    out, rest = proc.communicate(timeout=30)
    return proc.returncode, [json.loads(line) for line in out.splitlines()], err + rest


@needs_cc
def test_cli_tail_with_working_nvml_enriches_the_slammed4_alert(
    tmp_path: Path, fake_nvml_lib: Path
) -> None:
    """`logwatch tail` on train_slammed4.log, NVML found through LD_LIBRARY_PATH: the status line
    on stderr, one enriched nvml-disabled on stdout, no gpu-metrics-missing."""
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(SLAMMED4, logs / "train_slammed4.log")
    code, events, err = run_tail(
        logs, working_nvml(tmp_path, fake_nvml_lib), wait_for="following it"
    )
    assert code == 0, err
    assert "logwatch: GPUs: NVML: ok, 8x NVIDIA H200, driver 580.65.06\n" in err
    assert [(e["rule"], e["line"]) for e in events] == [("nvml-disabled", 3)]
    assert "NVML works here: 8x" in events[0]["summary"]
    assert "uv pip install nvidia-ml-py" in events[0]["fix"]


no_real_nvml = pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this host has a real NVML library"
)


@no_real_nvml
def test_cli_tail_without_nvml_says_why_once(tmp_path: Path) -> None:
    """No NVML here, --gpu auto: one line on stderr with the reason and fix, one info alert."""
    (tmp_path / "a.log").write_text("step 1 | loss 2.0\n")
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    code, events, err = run_tail(tmp_path, env, wait_for="following it")
    assert code == 0, err
    assert [(e["rule"], e["severity"]) for e in events] == [("logwatch-gpu-unavailable", "info")]
    nvml_lines = [line for line in err.splitlines() if "NVML" in line]
    assert len(nvml_lines) == 1
    assert (
        nvml_lines[0].startswith("logwatch: GPUs: NVML unavailable: ")
        and "; fix: " in nvml_lines[0]
    )


@no_real_nvml
def test_cli_tail_gpu_required_without_nvml_exits_2(tmp_path: Path) -> None:
    """--gpu required on a host without NVML: exit 2 with one line, before following anything."""
    (tmp_path / "a.log").write_text("step 1 | loss 2.0\n")
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "logwatch.cli",
            "tail",
            str(tmp_path / "*.log"),
            "--gpu",
            "required",
            "--state-dir",
            str(tmp_path / "state"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("Error: ") and proc.stderr.count("\n") == 1
    assert 'mode = "required"' in proc.stderr


@needs_cc
def test_doctor_nvml_line_with_working_nvml(tmp_path: Path, fake_nvml_lib: Path) -> None:
    """`logwatch doctor` says NVML works, with the hardware, through the same reader as tail."""
    proc = subprocess.run(
        [sys.executable, "-m", "logwatch.cli", "doctor"],
        cwd=tmp_path,
        env=working_nvml(tmp_path, fake_nvml_lib),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok   nvml: NVML works: 8x NVIDIA H200, driver 580.65.06" in proc.stdout.splitlines()


def test_unusable_saved_gpu_state_is_said_and_started_afresh(tmp_path: Path) -> None:
    """A checkpoint whose GPU part is malformed: one status line, the files still resume."""
    clock = FakeClock()
    (tmp_path / "train.log").write_bytes(b"step 1 | loss 2.0\n")
    tail, link = linked_tail(tmp_path, FakeGpuReader(count=1), clock)
    with running(tail.driver) as driver:
        driver.sync()
    link.close()
    checkpoint = tmp_path / "state" / "checkpoint.json"
    data = json.loads(checkpoint.read_text())
    data["extras"]["gpu"] = {"monitor": "garbage"}
    checkpoint.write_text(json.dumps(data))
    tail, link = linked_tail(tmp_path, FakeGpuReader(count=1), clock)
    with running(tail.driver) as driver:
        driver.sync()
    link.close()
    assert tail.said("the saved gpu state is unusable") == 1
    assert tail.said("resuming at line 2") == 1


@pytest.mark.parametrize(
    ("line", "fix_says"),
    [
        ("Failed to initialize NVML: Driver/library version mismatch", "reboot the node"),
        ("pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found", "--gpus all"),
        ("Failed to initialize NVML: Unknown Error", "restart the container"),
    ],
)
def test_nvml_causes_other_than_a_missing_module_keep_their_own_fix(
    tmp_path: Path, line: str, fix_says: str
) -> None:
    """With NVML working here, an nvml-disabled whose line names another cause keeps that
    cause's fix: `pip install nvidia-ml-py` does not mend a driver mismatch or a container
    without its driver."""
    (tmp_path / "train.log").write_text(
        "2026-11-28 14:00:00,000 INFO [train] run start: run_id=a pid=100 gpus=8\n"
        f"2026-11-28 14:00:01,000 WARNING [telemetry] {line}; GPU telemetry disabled\n"
    )
    clock = FakeClock(start=datetime(2026, 11, 28, 16, 30, 0))
    tail, link = linked_tail(tmp_path, FakeGpuReader(count=8), clock)
    with running(tail.driver) as driver:
        driver.sync()
    [alert] = [e for e in tail.sink.events if e.rule == "nvml-disabled"]
    assert fix_says in alert.fix and "pip install nvidia-ml-py" not in alert.fix
    assert "lacks nvidia-ml-py" not in alert.summary
    link.close()
