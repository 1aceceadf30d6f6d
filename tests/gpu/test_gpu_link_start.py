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
