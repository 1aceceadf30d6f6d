"""`start_gpu_link`: the GPU side `tail` and `top` start from the `[gpu]` settings."""

from __future__ import annotations

import pytest

from logwatch.errors import GpuUnavailableError
from logwatch.gpu.link import GpuLink, start_gpu_link
from logwatch.gpu.model import GpuSettings, NvmlReason
from logwatch.rules.loader import builtin_rules_dir, load_rules
from logwatch.testing import FakeGpuReader


def test_off_says_so_and_starts_nothing() -> None:
    """Mode off: the status line says how to turn it on, no link, NVML never opened."""
    said: list[str] = []
    reader = FakeGpuReader()
    link = start_gpu_link(GpuSettings.parse("off"), reader, [], said.append)
    assert link is None
    assert said == ["GPUs: off (--gpu off or [gpu] mode)"]
    assert reader.reads == 0


def test_auto_with_gpus_links_them_and_says_nvml_works() -> None:
    """Mode auto on a host with GPUs: a `GpuLink` sampling them, and NVML's status line."""
    said: list[str] = []
    reader = FakeGpuReader(count=2)
    link = start_gpu_link(
        GpuSettings.parse("auto", "1s"), reader, load_rules([builtin_rules_dir()]), said.append
    )
    try:
        assert isinstance(link, GpuLink)
        assert link.started.sampler is not None
        assert said == [f"GPUs: {link.started.status.line()}"] and "NVML: ok" in said[0]  # type: ignore[union-attr]  # auto with GPUs has a status
    finally:
        if link is not None:
            link.close()
    assert reader.closed


def test_auto_without_nvml_says_why_and_required_refuses() -> None:
    """No NVML here: auto still gives a link (its GPU rules say it's unavailable) and a line
    with the reason and the fix; required raises the typed error instead."""
    failure = (NvmlReason.LIBRARY_NOT_FOUND, "libnvidia-ml.so.1: cannot open")
    said: list[str] = []
    link = start_gpu_link(
        GpuSettings.parse("auto"), FakeGpuReader(init_failure=failure), [], said.append
    )
    assert link is not None and link.started.sampler is None
    link.close()
    assert said[0].startswith("GPUs: NVML unavailable: no NVIDIA driver library")
    with pytest.raises(GpuUnavailableError):
        start_gpu_link(
            GpuSettings.parse("required"), FakeGpuReader(init_failure=failure), [], said.append
        )


def test_a_live_runs_nvml_notice_says_how_to_turn_it_off() -> None:
    """`tail`/`top` without NVML: the stderr line's and the info alert's fix end with
    "or pass `--gpu off`" (a host without GPUs on purpose can silence it)."""
    failure = (NvmlReason.LIBRARY_NOT_FOUND, "libnvidia-ml.so.1: cannot open")
    said: list[str] = []
    link = start_gpu_link(
        GpuSettings.parse("auto"), FakeGpuReader(init_failure=failure), [], said.append
    )
    assert link is not None
    link.close()
    (event,) = link.started.events
    assert said == [
        "GPUs: NVML unavailable: no NVIDIA driver library (libnvidia-ml.so.1) on this host "
        "(libnvidia-ml.so.1: cannot open); fix: run on a host with the NVIDIA driver installed, "
        "or in a container started with --gpus / the NVIDIA runtime, or pass `--gpu off`"
    ]
    assert event.fix.endswith(", or pass `--gpu off`")
