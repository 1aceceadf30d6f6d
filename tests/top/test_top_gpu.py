"""`logwatch top`'s GPU lines: real pynvml over the stand-in libnvidia-ml.so.1, and NVML absent."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.fakenvml.build import write_control
from tests.gpu.test_live import needs_cc, no_real_nvml
from tests.top.tmuxkit import START_S, TmuxTop, needs_tmux, run_start, step_line

pytestmark = needs_tmux


@needs_cc
def test_gpu_table_shows_each_gpu_and_the_run_on_it(tmp_path: Path, fake_nvml_lib: Path) -> None:
    """Two stand-in H200s; the run's logged pid (this test's process) holds GPU 1: each GPU has
    its util, memory, power, temperature and ECC, and GPU 1 names the run."""
    lib = fake_nvml_lib
    control = tmp_path / "nvml.ctl"
    write_control(
        control,
        {
            "driver": "580.65.06",
            "count": 2,
            "g0.util": 3,
            "g1.util": 97,
            "g1.mem_used": 75 << 30,
            "g1.power_mw": 612000,
            "g1.temp": 71,
            "g1.ecc": 2,
            "g1.pids": f"{os.getpid()}:{70 << 30}",
        },
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "train.log").write_text(run_start("gpurun", os.getpid()) + step_line(5, "3.0"))
    env = {"LD_LIBRARY_PATH": str(lib.parent), "FAKE_NVML_CONTROL": str(control)}
    args = [str(logs / "*.log"), "--state-dir", str(tmp_path / "state"), "--gpu-interval", "0.5s"]
    top = TmuxTop(tmp_path, args, env=env)
    try:
        screen = top.wait_for(lambda s: "GPU1" in s and "run gpurun" in s, START_S)
        (gpu1,) = [line for line in screen.splitlines() if line.startswith("GPU1")]
        assert re.search(
            r"GPU1 NVIDIA H200 +util 97% +mem 75/140G +612W +71C +ecc 2 +run gpurun", gpu1
        )
        (gpu0,) = [line for line in screen.splitlines() if line.startswith("GPU0")]
        assert "util 3%" in gpu0 and gpu0.endswith("run -")
    finally:
        top.close()


@no_real_nvml
def test_without_nvml_one_line_says_why(tmp_path: Path) -> None:
    """No NVML library here, --gpu auto: the view says NVML is unavailable with the reason."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "train.log").write_text(step_line(5, "3.0"))
    env = {"LD_LIBRARY_PATH": str(tmp_path / "nothing")}
    top = TmuxTop(tmp_path, [str(logs / "*.log"), "--state-dir", str(tmp_path / "state")], env=env)
    try:
        screen = top.wait_for(lambda s: "NVML unavailable" in s, START_S)
        (line,) = [line for line in screen.splitlines() if line.startswith("NVML unavailable")]
        assert line.startswith("NVML unavailable: no NVIDIA driver library") or line.startswith(
            "NVML unavailable: module pynvml is missing"
        ), line
    finally:
        top.close()
