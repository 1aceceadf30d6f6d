"""The built-in match rules fire on the real failure lines and stay quiet on look-alikes."""

from __future__ import annotations

import polars as pl
import pytest

from logwatch.engine import Engine
from logwatch.parse import parse_lines
from logwatch.rules.loader import builtin_rules_dir, load_rules

RULES = load_rules([builtin_rules_dir()])


def fired(text: str) -> set[str]:
    """The rules that fire on one line."""
    frame = parse_lines(pl.Series([text]), source="t.log", first_line=1, default_year=2026)
    return {e.rule for e in Engine(RULES).process(frame)}


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (
            "2026-11-28 14:02:04,551 WARNING [telemetry] NVML unavailable (No module named 'pynvml'); GPU telemetry disabled",
            "nvml-disabled",
        ),
        ("Failed to initialize NVML: Driver/library version mismatch", "nvml-disabled"),
        (
            "WARNING:gpu_monitor:NVML unavailable (pynvml.nvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found)",
            "nvml-disabled",
        ),
        ("NVML error: Unknown Error", "nvml-disabled"),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacty of 79.15 GiB",
            "cuda-oom",
        ),
        (
            "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity)",
            "cuda-oom",
        ),
        (
            "[rank2]:[E1130 06:31:02.118 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5120, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.",
            "nccl-timeout",
        ),
        (
            "[Mon Nov 30 06:31:40 2026] NVRM: Xid (PCI:0000:44:00): 79, pid=60880, name=python, GPU has fallen off the bus.",
            "gpu-lost",
        ),
        (
            "NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:2330) installed in this system has fallen off the bus and is not responding to commands.",
            "gpu-lost",
        ),
        ("NVRM: Xid (PCI:0000:44:00): 13, Graphics Exception on GPC 0", "xid"),
        (
            "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
            "loss-scale-collapse",
        ),
        (
            "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding.",
            "loss-scale-collapse",
        ),
    ],
)
def test_failure_lines_fire(text: str, rule: str) -> None:
    """Each real failure line fires its rule."""
    assert rule in fired(text)


@pytest.mark.parametrize(
    "text",
    [
        "nvml_errors=0 gpu/0/util=99",
        "telemetry={'backend': 'nvml', 'on_error': 'warn'}",
        "NVML initialized OK: 8 GPUs, driver 580.65.06",
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
        "Setting PYTORCH_CUDA_ALLOC_CONF to avoid out-of-memory errors",
        "2026-11-28 14:09:05,117 INFO [train] step 120/200000 | loss 3.4812 | grad_norm 1.92 | q_hs=31 q_hsb=[1,2,2,5,5,16]",
    ],
)
def test_look_alikes_stay_quiet(text: str) -> None:
    """Settings, counters, a single overflow and healthy lines fire nothing."""
    assert fired(text) == set()
