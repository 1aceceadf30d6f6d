"""The real pynvml binding against a stand-in libnvidia-ml.so.1 built from C in the tests.

The stand-in exports the NVML symbols pynvml resolves, with values and failures each test
writes into a control file. In-process tests preload it by its soname (so pynvml's own
`CDLL("libnvidia-ml.so.1")` finds it); CLI tests run `logwatch gpu` in a subprocess with
LD_LIBRARY_PATH, as a user would.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from logwatch.errors import GpuUnavailableError
from logwatch.gpu.model import GpuSettings, NvmlReason
from logwatch.gpu.nvml import NvmlReader
from logwatch.gpu.sampler import start_gpu, take_snapshot
from tests.fakenvml.build import compiler, write_control

TS = datetime(2026, 11, 28, 14, 0, 0)
pytestmark = pytest.mark.skipif(
    compiler() is None, reason="no C compiler (gcc/cc): cannot build the stand-in libnvidia-ml.so.1"
)


@pytest.fixture
def control(fake_nvml_lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A control file for the stand-in, with the stand-in loaded in this process."""
    path = tmp_path / "nvml.ctl"
    write_control(path, {"driver": "fake-580.65.06", "count": 2})
    monkeypatch.setenv("FAKE_NVML_CONTROL", str(path))
    ctypes.CDLL(str(fake_nvml_lib), mode=ctypes.RTLD_GLOBAL)
    import pynvml

    pynvml.nvmlInit()
    try:
        if pynvml.nvmlSystemGetDriverVersion() != "fake-580.65.06":
            pytest.skip("a real libnvidia-ml.so.1 was loaded in this process before the stand-in")
    finally:
        pynvml.nvmlShutdown()
    yield path


def test_reader_reads_every_metric_through_pynvml(control: Path) -> None:
    """Every metric the sampler needs arrives through the real binding, in the units we name."""
    write_control(
        control,
        {
            "driver": "fake-580.65.06",
            "count": 2,
            "g1.name": "NVIDIA H200",
            "g1.uuid": "GPU-abc",
            "g1.util": 87,
            "g1.memutil": 41,
            "g1.mem_total": 150754820096,
            "g1.mem_used": 75 << 30,
            "g1.power_mw": 612345,
            "g1.limit_mw": 700000,
            "g1.temp": 67,
            "g1.reasons": 0x41,
            "g1.ecc": 2,
            "g1.pids": "41626:1073741824,41700:2048",
        },
    )
    reader = NvmlReader()
    status = reader.init()
    sample = reader.read(1, TS)
    reader.close()
    assert status.available and status.line() == "NVML: ok, 2x NVIDIA H200, driver fake-580.65.06"
    assert (sample.uuid, sample.util_gpu, sample.util_mem) == ("GPU-abc", 87.0, 41.0)
    assert (sample.mem_used_bytes, sample.mem_total_bytes) == (75 << 30, 150754820096)
    assert (sample.power_w, sample.power_limit_w, sample.temp_c) == (612.345, 700.0, 67.0)
    assert (sample.clock_event_reasons, sample.ecc_uncorrected) == (0x41, 2)
    assert [(p.pid, p.used_bytes) for p in sample.processes or ()] == [
        (41626, 1 << 30),
        (41700, 2048),
    ]


@pytest.mark.parametrize(
    ("code", "reason", "error"),
    [
        (12, NvmlReason.LIBRARY_NOT_FOUND, "NVMLError_LibraryNotFound"),
        (9, NvmlReason.DRIVER_NOT_LOADED, "NVMLError_DriverNotLoaded"),
        (18, NvmlReason.VERSION_MISMATCH, "NVMLError_LibRmVersionMismatch"),
        (4, NvmlReason.NO_PERMISSION, "NVMLError_NoPermission"),
        (999, NvmlReason.OTHER, "NVMLError_Unknown"),
    ],
)
def test_init_failures_become_typed_reasons_with_fixes(
    control: Path, code: int, reason: NvmlReason, error: str
) -> None:
    """Each way nvmlInit fails gives its reason, pynvml's error name and a fix; never a raise."""
    write_control(control, {"init": code})
    status = NvmlReader().init()
    assert status.reason is reason
    assert status.detail.startswith(error)
    assert status.fix and status.fix in status.line()


def test_version_mismatch_line_says_reboot_or_reload(control: Path) -> None:
    """The mismatch case tells the user to reboot or reload the module, as nvidia-smi users do."""
    write_control(control, {"init": 18})
    line = NvmlReader().init().line()
    assert line.startswith("NVML unavailable: driver/library version mismatch")
    assert "reboot, or reload the nvidia kernel modules" in line


def test_required_mode_fails_and_auto_mode_says_why(control: Path) -> None:
    """required: a LogwatchError naming the reason; auto: no sampler, one info alert with the fix."""
    write_control(control, {"init": 9})
    with pytest.raises(GpuUnavailableError, match="kernel driver is not loaded"):
        start_gpu(GpuSettings(mode="required"), NvmlReader())
    started = start_gpu(GpuSettings(mode="auto"), NvmlReader())
    assert started.sampler is None and started.status is not None
    [event] = started.events
    assert (event.rule, event.severity.label, event.labels["reason"]) == (
        "logwatch-gpu-unavailable",
        "info",
        "driver_not_loaded",
    )
    assert "modprobe nvidia" in event.fix


def test_not_supported_metric_is_null_and_never_polled_again(control: Path) -> None:
    """A NotSupported metric is None for that device only, and stays off once it is off."""
    write_control(
        control, {"count": 2, "g0.fail.power": 3, "g0.fail.ecc": 3, "g1.power_mw": 500000}
    )
    reader = NvmlReader()
    reader.init()
    first = reader.read(0, TS)
    other = reader.read(1, TS)
    problems = reader.problems()
    write_control(control, {"count": 2, "g0.power_mw": 400000, "g0.ecc": 1})
    again = reader.read(0, TS)
    reader.close()
    assert (first.power_w, first.ecc_uncorrected, first.temp_c) == (None, None, 40.0)
    assert other.power_w == 500.0
    assert {(p.metric, p.kind) for p in problems} == {
        ("power", "unsupported"),
        ("ecc", "unsupported"),
    }
    assert (again.power_w, again.ecc_uncorrected) == (None, None)


def test_unexpected_error_is_counted_and_reported_once(control: Path) -> None:
    """An unexpected NVML error nulls the metric each time, but is reported only once."""
    write_control(control, {"count": 1, "g0.fail.temp": 999})
    reader = NvmlReader()
    reader.init()
    samples = [reader.read(0, TS) for _ in range(3)]
    problems = reader.problems()
    write_control(control, {"count": 1, "g0.temp": 55})
    recovered = reader.read(0, TS)
    reader.close()
    assert [s.temp_c for s in samples] == [None, None, None]
    assert [(p.metric, p.kind, p.error) for p in problems] == [
        ("temperature", "error", "NVMLError_Unknown: Unknown Error")
    ]
    assert reader.error_counts() == {(0, "temperature"): 3}
    assert recovered.temp_c == 55.0


def test_gpu_is_lost_marks_the_device_lost(control: Path) -> None:
    """GpuIsLost on a device gives a lost sample (no metrics) and a `lost` problem; others read on."""
    write_control(control, {"count": 2, "g1.fail.util": 15, "g0.util": 90})
    reader = NvmlReader()
    reader.init()
    lost = reader.read(1, TS)
    fine = reader.read(0, TS)
    problems = reader.problems()
    reader.close()
    assert lost.lost and lost.util_gpu is None and lost.mem_used_bytes is None
    assert fine.util_gpu == 90.0 and not fine.lost
    assert [(p.index, p.kind) for p in problems] == [(1, "lost")]


def test_a_device_lost_before_start_costs_only_that_device(control: Path) -> None:
    """GpuIsLost when opening GPU 2 at start: NVML still works, GPU 2 reads as lost (so the live
    gpu-lost alert fires), the others are read; another per-device error is reported once."""
    write_control(control, {"count": 4, "g2.fail.handle": 15, "g1.fail.handle": 4, "g0.util": 90})
    reader = NvmlReader()
    status = reader.init()
    samples = [reader.read(i, TS) for i in range(4)]
    problems = reader.problems()
    reader.close()
    assert status.available and [d.name for d in status.devices][1:3] == ["(cannot open)", "(lost)"]
    assert samples[2].lost and not samples[1].lost and samples[1].util_gpu is None
    assert samples[0].util_gpu == 90.0 and samples[3].util_gpu is not None
    assert sorted((p.index, p.metric, p.kind) for p in problems) == [
        (1, "handle", "error"),
        (2, "handle", "lost"),
    ]


def test_old_driver_falls_back_to_deprecated_calls(control: Path) -> None:
    """Without the new clock-events call or process _v3, the deprecated throttle call and _v2 answer."""
    write_control(
        control,
        {
            "count": 1,
            "g0.fail.reasons": 13,
            "g0.fail.procs3": 13,
            "g0.reasons": 0x20,
            "g0.pids": "77:5",
        },
    )
    reader = NvmlReader()
    reader.init()
    sample = reader.read(0, TS)
    reader.close()
    assert sample.clock_event_reasons == 0x20
    assert [(p.pid, p.used_bytes) for p in sample.processes or ()] == [(77, 5)]


def test_module_missing_says_install_nvidia_ml_py() -> None:
    """Without the pynvml module the status names it and the package to install."""

    def missing() -> object:
        raise ModuleNotFoundError("No module named 'pynvml'")

    status = NvmlReader(import_module=missing).init()  # type: ignore[arg-type]
    assert status.reason is NvmlReason.MODULE_MISSING
    assert "pip install nvidia-ml-py" in status.line()


def test_snapshot_through_the_sampler(control: Path) -> None:
    """`take_snapshot` inits, reads every device once and shuts NVML down."""
    write_control(control, {"count": 3, "g2.util": 12})
    snapshot = take_snapshot(NvmlReader())
    assert [s.index for s in snapshot.samples] == [0, 1, 2]
    assert snapshot.samples[2].util_gpu == 12.0


def _cli(lib_dir: Path | None, control: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["FAKE_NVML_CONTROL"] = str(control)
    if lib_dir is not None:
        env["LD_LIBRARY_PATH"] = str(lib_dir)
    return subprocess.run(
        [sys.executable, "-m", "logwatch.cli", "gpu", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_logwatch_gpu_table_through_ld_library_path(fake_nvml_lib: Path, tmp_path: Path) -> None:
    """`logwatch gpu` finds the library as a user's would, prints the status line then the table."""
    control = tmp_path / "ctl"
    write_control(
        control,
        {
            "driver": "580.65.06",
            "count": 2,
            "g0.util": 93,
            "g0.mem_used": 70 << 30,
            "g0.power_mw": 612000,
            "g0.temp": 66,
            "g0.pids": "41626:5",
            "g1.fail.power": 3,
            "g1.fail.util": 15,
        },
    )
    result = _cli(fake_nvml_lib.parent, control)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "NVML: ok, 2x NVIDIA H200, driver 580.65.06"
    assert lines[1].split() == [
        "GPU",
        "NAME",
        "UTIL",
        "MEM",
        "USED/TOTAL",
        "GiB",
        "POWER/LIMIT",
        "W",
        "TEMP",
        "CLOCKS",
        "ECC",
        "PIDS",
    ]
    assert lines[2].split() == [
        "0",
        "NVIDIA",
        "H200",
        "93%",
        "70.0/140.4",
        "612/700",
        "66C",
        "ok",
        "0",
        "41626",
    ]
    assert lines[3].split()[:4] == ["1", "NVIDIA", "H200", "LOST"]


def test_logwatch_gpu_json_and_unavailable_exit_code(fake_nvml_lib: Path, tmp_path: Path) -> None:
    """`--format json` carries the status and nulls for unsupported metrics; a failed init exits 1."""
    control = tmp_path / "ctl"
    write_control(control, {"count": 1, "g0.fail.ecc": 3})
    ok = _cli(fake_nvml_lib.parent, control, "--format", "json")
    write_control(control, {"init": 18})
    bad = _cli(fake_nvml_lib.parent, control, "--format", "json")
    data = json.loads(ok.stdout)
    assert ok.returncode == 0 and data["nvml"]["available"] is True
    assert data["gpus"][0]["ecc_uncorrected"] is None and data["gpus"][0]["temp_c"] == 40.0
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["nvml"]["reason"] == "version_mismatch"


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None,
    reason="this host has a real NVIDIA driver library, so 'library not found' cannot happen here",
)
def test_logwatch_gpu_without_any_library(tmp_path: Path) -> None:
    """On a host without libnvidia-ml.so.1 the status line names the reason and the fix."""
    result = _cli(None, tmp_path / "absent")
    assert result.returncode == 1
    assert result.stdout.startswith(
        "NVML unavailable: no NVIDIA driver library (libnvidia-ml.so.1) on this host "
        "(NVMLError_LibraryNotFound: NVML Shared Library Not Found); fix: "
    )
