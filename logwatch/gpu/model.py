"""GPU records, the reader protocol, NVML status with a typed reason and a fix, and settings."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from logwatch.durations import parse_duration
from logwatch.gpu.mode import DEFAULT_INTERVAL_S, GpuMode


@dataclass(frozen=True, slots=True)
class GpuSettings:
    """The `[gpu]` table of the config: whether NVML must work, and how often to sample."""

    mode: GpuMode = GpuMode.AUTO
    interval_s: float = DEFAULT_INTERVAL_S

    @classmethod
    def parse(cls, mode: str = "auto", interval: str = "5s") -> GpuSettings:
        """Settings from config text; ValueError naming the bad value and what is accepted."""
        if mode not in set(GpuMode):
            raise ValueError(f"gpu mode {mode!r} is not one of: {', '.join(GpuMode)}")
        interval_s = parse_duration(interval)
        if interval_s < 0.5:
            raise ValueError(f"gpu interval {interval!r} is below 0.5s; NVML reads are not free")
        return cls(mode=GpuMode(mode), interval_s=interval_s)


class NvmlReason(enum.Enum):
    """Why NVML is unavailable; each reason has a fix."""

    MODULE_MISSING = "module pynvml is missing"
    LIBRARY_NOT_FOUND = "no NVIDIA driver library (libnvidia-ml.so.1) on this host"
    DRIVER_NOT_LOADED = "the NVIDIA kernel driver is not loaded"
    VERSION_MISMATCH = "driver/library version mismatch"
    NO_PERMISSION = "no permission to access the GPUs"
    NO_DEVICES = "NVML works but sees no GPU"
    HUNG = "NVML did not answer"
    OTHER = "NVML failed to initialize"


FIXES: dict[NvmlReason, str] = {
    NvmlReason.MODULE_MISSING: "install nvidia-ml-py into logwatch's environment (pip install nvidia-ml-py)",
    NvmlReason.LIBRARY_NOT_FOUND: "run on a host with the NVIDIA driver installed, or in a container started with --gpus / the NVIDIA runtime",
    NvmlReason.DRIVER_NOT_LOADED: "load the driver (sudo modprobe nvidia) or reinstall it; check dmesg for why it failed",
    NvmlReason.VERSION_MISMATCH: "the driver was upgraded under a running kernel module: reboot, or reload the nvidia kernel modules",
    NvmlReason.NO_PERMISSION: "run logwatch as a user that can open /dev/nvidia* (or in a container with the GPUs exposed)",
    NvmlReason.NO_DEVICES: "check that the GPUs are visible to this host or container (nvidia-smi -L)",
    NvmlReason.HUNG: "check the driver (nvidia-smi may hang too); enable persistence mode (nvidia-smi -pm 1)",
    NvmlReason.OTHER: "run nvidia-smi to see the driver's own error",
}

NVML_ERROR_REASONS: dict[int, NvmlReason] = {
    4: NvmlReason.NO_PERMISSION,
    9: NvmlReason.DRIVER_NOT_LOADED,
    12: NvmlReason.LIBRARY_NOT_FOUND,
    18: NvmlReason.VERSION_MISMATCH,
}
"""NVML error codes (nvml.h) that init can fail with, by reason."""


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """A GPU's identity, read once."""

    index: int
    name: str
    uuid: str
    mem_total_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class NvmlStatus:
    """Whether NVML works here; when not, the typed reason, the error text and the fix."""

    reason: NvmlReason | None
    detail: str = ""
    driver: str | None = None
    devices: tuple[DeviceInfo, ...] = ()

    @property
    def available(self) -> bool:
        """True when NVML answered and sees at least one GPU."""
        return self.reason is None

    @property
    def fix(self) -> str:
        """What to do about it (empty when NVML works)."""
        return "" if self.reason is None else FIXES[self.reason]

    def hardware(self) -> str:
        """`8x NVIDIA H200, driver 580.65.06` (models grouped, in index order)."""
        counts: dict[str, int] = {}
        for device in self.devices:
            counts[device.name] = counts.get(device.name, 0) + 1
        models = ", ".join(f"{n}x {name}" for name, n in counts.items())
        return f"{models}, driver {self.driver or '?'}"

    def line(self) -> str:
        """One line for stderr / `logwatch gpu`: what works, or why not and the fix."""
        if self.reason is None:
            return f"NVML: ok, {self.hardware()}"
        detail = f" ({self.detail})" if self.detail else ""
        return f"NVML unavailable: {self.reason.value}{detail}; fix: {self.fix}"


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A compute process on a GPU (host pid namespace)."""

    pid: int
    used_bytes: int | None


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One device at one time. None means not supported, not readable, or the device is lost."""

    ts: datetime
    index: int
    uuid: str
    name: str
    util_gpu: float | None = None
    util_mem: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: float | None = None
    clock_event_reasons: int | None = None
    ecc_uncorrected: int | None = None
    processes: tuple[GpuProcess, ...] | None = None
    lost: bool = False

    def metrics(self) -> dict[str, Any]:
        """Identity and metric fields as a flat dict (frames and JSON build on it)."""
        return {
            "uuid": self.uuid,
            "name": self.name,
            "lost": self.lost,
            **{name: getattr(self, name) for name in METRIC_FIELDS},
        }


METRIC_FIELDS = (
    "util_gpu",
    "util_mem",
    "mem_used_bytes",
    "mem_total_bytes",
    "power_w",
    "power_limit_w",
    "temp_c",
    "clock_event_reasons",
    "ecc_uncorrected",
)


@dataclass(frozen=True, slots=True)
class ReadProblem:
    """Something a reader reports once: a metric switched off, or an unexpected error."""

    index: int
    metric: str
    error: str
    kind: Literal["unsupported", "error", "lost"]
    count: int = 1


class GpuReader(Protocol):
    """The NVML seam: the real reader over pynvml, or `logwatch.testing.FakeGpuReader`."""

    def init(self) -> NvmlStatus:
        """Start NVML once and read the device list; never raises for an unavailable NVML."""
        ...

    def devices(self) -> tuple[DeviceInfo, ...]:
        """The devices found by `init`."""
        ...

    def read(self, index: int, ts: datetime) -> GpuSample:
        """One device's sample now; unsupported metrics are None; a lost GPU has `lost` set."""
        ...

    def problems(self) -> list[ReadProblem]:
        """Problems found since the last call, each reported once."""
        ...

    def close(self) -> None:
        """Shut NVML down."""
        ...


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    """`logwatch gpu`: the status and one sample per device."""

    status: NvmlStatus
    samples: tuple[GpuSample, ...] = field(default_factory=tuple)
