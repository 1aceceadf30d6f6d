"""`[gpu] mode` and the default sampling interval: what the config needs of the GPU side, apart
from the GPU records (`logwatch.gpu.model`) so that reading a config, as every replay does,
does not build them."""

from __future__ import annotations

from enum import StrEnum


class GpuMode(StrEnum):
    """`[gpu] mode` / `--gpu`: auto says why NVML cannot work, required exits 2 then, off."""

    AUTO = "auto"
    REQUIRED = "required"
    OFF = "off"


DEFAULT_INTERVAL_S = 5.0

__all__ = ["DEFAULT_INTERVAL_S", "GpuMode"]
