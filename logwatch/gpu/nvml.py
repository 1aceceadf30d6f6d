"""The real GPU reader over nvidia-ml-py's `pynvml`, imported when `init` runs.

Each metric fails on its own: NotSupported (or a missing function) makes that metric None for
that device and it is not polled again; any other NVML error is counted, and reported once per
(device, metric); GpuIsLost marks the device lost. Only `init` touches the library's global state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime
from types import ModuleType
from typing import Any

from logwatch.gpu.model import (
    NVML_ERROR_REASONS,
    DeviceInfo,
    GpuProcess,
    GpuSample,
    NvmlReason,
    NvmlStatus,
    ReadProblem,
)

NOT_SUPPORTED = 3
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
_SWITCH_OFF = (NOT_SUPPORTED, FUNCTION_NOT_FOUND)
_PROCESS_CALLS = (
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses",
)


def error_code(exc: BaseException) -> int | None:
    """The NVML error code of a pynvml exception, if it is one."""
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def error_name(exc: BaseException) -> str:
    """`NVMLError_NotSupported: Not Supported`, as pynvml names it."""
    try:
        text = str(exc)
    except Exception:  # pynvml's __str__ calls into the library, which may be gone
        text = f"code {error_code(exc)}"
    return f"{type(exc).__name__}: {text}"


class NvmlReader:
    """Reads GPUs through pynvml; one instance per process, used from one thread at a time."""

    def __init__(self, import_module: Callable[[], ModuleType] | None = None) -> None:
        self._import = import_module or _import_pynvml
        self._nvml: Any = None
        self._handles: dict[int, Any] = {}
        self._devices: tuple[DeviceInfo, ...] = ()
        self._off: set[tuple[int, str]] = set()
        self._errors: dict[tuple[int, str], int] = {}
        self._reported: set[tuple[int, str]] = set()
        self._lost: set[int] = set()
        self._pending: list[ReadProblem] = []

    def init(self) -> NvmlStatus:
        """nvmlInit, device handles and identities; a typed status instead of an exception."""
        try:
            nvml = self._import()
        except ImportError as exc:
            return NvmlStatus(NvmlReason.MODULE_MISSING, detail=str(exc))
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            reason = NVML_ERROR_REASONS.get(error_code(exc) or 0, NvmlReason.OTHER)
            return NvmlStatus(reason, detail=error_name(exc))
        self._nvml = nvml
        try:
            driver = _text(nvml.nvmlSystemGetDriverVersion())
            count = nvml.nvmlDeviceGetCount()
            self._devices = tuple(self._open(i) for i in range(count))
        except nvml.NVMLError as exc:
            self.close()
            return NvmlStatus(NvmlReason.OTHER, detail=error_name(exc))
        if not self._devices:
            return NvmlStatus(NvmlReason.NO_DEVICES, driver=driver)
        return NvmlStatus(None, driver=driver, devices=self._devices)

    def _open(self, index: int) -> DeviceInfo:
        """One device's handle and identity. A device that cannot be opened (lost, or another
        per-device error) costs that device only: it is reported, and the others are read."""
        nvml = self._nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except nvml.NVMLError as exc:
            self._failed((index, "handle"), exc)
            if error_code(exc) != GPU_IS_LOST:
                self._off.update((index, metric) for metric in _DEVICE_METRICS)
            self._handles[index] = None
            name = "(lost)" if error_code(exc) == GPU_IS_LOST else "(cannot open)"
            return DeviceInfo(index=index, name=name, uuid="?", mem_total_bytes=None)
        self._handles[index] = handle
        total = self._metric(index, "memory", lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        return DeviceInfo(
            index=index,
            name=_text(self._metric(index, "name", lambda: nvml.nvmlDeviceGetName(handle)) or "?"),
            uuid=_text(self._metric(index, "uuid", lambda: nvml.nvmlDeviceGetUUID(handle)) or "?"),
            mem_total_bytes=None if total is None else int(total.total),
        )

    def devices(self) -> tuple[DeviceInfo, ...]:
        return self._devices

    def read(self, index: int, ts: datetime) -> GpuSample:
        """One device now; each metric on its own, so one failure costs only that metric."""
        device = self._devices[index]
        base = GpuSample(ts=ts, index=index, uuid=device.uuid, name=device.name)
        if index in self._lost:
            return _lost(base)
        nvml, handle = self._nvml, self._handles[index]

        def get(metric: str, call: Callable[[], Any]) -> Any:
            return self._metric(index, metric, call)

        util = get("utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        memory = get("memory", lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        power = get("power", lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        limit = get("power_limit", lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
        temp = get("temperature", lambda: nvml.nvmlDeviceGetTemperature(handle, 0))
        reasons = get("clock_events", lambda: self._clock_events(handle))
        ecc = get("ecc", lambda: nvml.nvmlDeviceGetTotalEccErrors(handle, 1, 0))
        procs = get("processes", lambda: self._processes(handle))
        if index in self._lost:
            return _lost(base)
        return GpuSample(
            ts=ts,
            index=index,
            uuid=device.uuid,
            name=device.name,
            util_gpu=None if util is None else float(util.gpu),
            util_mem=None if util is None else float(util.memory),
            mem_used_bytes=None if memory is None else int(memory.used),
            mem_total_bytes=None if memory is None else int(memory.total),
            power_w=None if power is None else power / 1000.0,
            power_limit_w=None if limit is None else limit / 1000.0,
            temp_c=None if temp is None else float(temp),
            clock_event_reasons=None if reasons is None else int(reasons),
            ecc_uncorrected=None if ecc is None else int(ecc),
            processes=procs,
        )

    def _metric(self, index: int, metric: str, call: Callable[[], Any]) -> Any:
        """Call NVML for one metric; None when it is off, failed, or the GPU is lost."""
        key = (index, metric)
        if key in self._off or index in self._lost:
            return None
        try:
            return call()
        except self._nvml.NVMLError as exc:
            self._failed(key, exc)
            return None

    def _failed(self, key: tuple[int, str], exc: BaseException) -> None:
        index, metric = key
        code = error_code(exc)
        if code == GPU_IS_LOST:
            self._lost.add(index)
            self._pending.append(ReadProblem(index, metric, error_name(exc), "lost"))
        elif code in _SWITCH_OFF:
            self._off.add(key)
            self._pending.append(ReadProblem(index, metric, error_name(exc), "unsupported"))
        else:
            self._errors[key] = self._errors.get(key, 0) + 1
            if key not in self._reported:
                self._reported.add(key)
                self._pending.append(ReadProblem(index, metric, error_name(exc), "error"))

    def _clock_events(self, handle: Any) -> int:
        """The new name first; drivers older than it only have the deprecated one."""
        nvml = self._nvml
        try:
            return int(nvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
        except (AttributeError, nvml.NVMLError_FunctionNotFound):
            return int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))

    def _processes(self, handle: Any) -> tuple[GpuProcess, ...]:
        """Compute processes through the newest process call both sides have."""
        nvml = self._nvml
        names = [name for name in _PROCESS_CALLS if hasattr(nvml, name)]
        for i, name in enumerate(names):
            try:
                procs = getattr(nvml, name)(handle)
            except nvml.NVMLError as exc:
                if error_code(exc) != FUNCTION_NOT_FOUND or i == len(names) - 1:
                    raise
                continue
            except _mismatch(nvml) as exc:  # the unversioned wrapper's own error
                if i == len(names) - 1:
                    raise nvml.NVMLError(FUNCTION_NOT_FOUND) from exc
                continue
            return tuple(
                GpuProcess(int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory))
                for p in procs
            )
        raise nvml.NVMLError(FUNCTION_NOT_FOUND)

    def error_counts(self) -> dict[tuple[int, str], int]:
        """Unexpected NVML errors so far, per (device, metric)."""
        return dict(self._errors)

    def problems(self) -> list[ReadProblem]:
        pending, self._pending = self._pending, []
        return pending

    def close(self) -> None:
        if self._nvml is not None:
            # shutting down: an error here changes nothing, the library state is gone either way
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
            self._nvml = None


def _mismatch(nvml: Any) -> type[Exception]:
    error: type[Exception] = getattr(nvml, "NVMLLibraryMismatchError", nvml.NVMLError)
    return error


_DEVICE_METRICS = (
    "utilization",
    "memory",
    "power",
    "power_limit",
    "temperature",
    "clock_events",
    "ecc",
    "processes",
)
"""What `read` asks NVML for, per device (a device that cannot be opened has none of them)."""


def _lost(base: GpuSample) -> GpuSample:
    return GpuSample(ts=base.ts, index=base.index, uuid=base.uuid, name=base.name, lost=True)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _import_pynvml() -> ModuleType:
    import pynvml

    module: ModuleType = pynvml
    return module
