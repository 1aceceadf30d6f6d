"""`logwatch gpu`: one snapshot of the GPUs as a table or JSON, the NVML status line first."""

from __future__ import annotations

from typing import Any

from logwatch.gpu.frames import GIB, THERMAL_REASONS_MASK
from logwatch.gpu.model import GpuSample, GpuSnapshot

_HEADER = f"{'GPU':>3}  {'NAME':<20} {'UTIL':>5} {'MEM USED/TOTAL GiB':>19} {'POWER/LIMIT W':>14} {'TEMP':>5} {'CLOCKS':>8} {'ECC':>4}  PIDS"


def _cell(value: float | int | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _clocks(reasons: int | None) -> str:
    if reasons is None:
        return "-"
    return "THERMAL" if reasons & THERMAL_REASONS_MASK else "ok"


def _row(s: GpuSample) -> str:
    if s.lost:
        return f"{s.index:>3}  {s.name[:20]:<20} LOST (GpuIsLost: fell off the bus or stopped answering)"
    used = _cell(None if s.mem_used_bytes is None else s.mem_used_bytes / GIB, ".1f")
    total = _cell(None if s.mem_total_bytes is None else s.mem_total_bytes / GIB, ".1f")
    power = f"{_cell(s.power_w, '.0f')}/{_cell(s.power_limit_w, '.0f')}"
    pids = "-" if s.processes is None else ",".join(str(p.pid) for p in s.processes) or "none"
    util = "-" if s.util_gpu is None else f"{s.util_gpu:.0f}%"
    temp = "-" if s.temp_c is None else f"{s.temp_c:.0f}C"
    return (
        f"{s.index:>3}  {s.name[:20]:<20} {util:>5} {used + '/' + total:>19} {power:>14} "
        f"{temp:>5} {_clocks(s.clock_event_reasons):>8} {_cell(s.ecc_uncorrected, 'd'):>4}  {pids}"
    )


def snapshot_lines(snapshot: GpuSnapshot) -> list[str]:
    """The status line, then a table row per GPU ('-' where a metric is not supported)."""
    lines = [snapshot.status.line()]
    if snapshot.status.available and not snapshot.samples:
        lines.append("no sample: NVML did not answer in time")
    if snapshot.samples:
        lines += [_HEADER, *(_row(s) for s in snapshot.samples)]
    return lines


def snapshot_json(snapshot: GpuSnapshot) -> dict[str, Any]:
    """The same as a JSON object: {"nvml": {...}, "gpus": [...]}; null where not supported."""
    status = snapshot.status
    return {
        "nvml": {
            "available": status.available,
            "reason": None if status.reason is None else status.reason.name.lower(),
            "detail": status.detail,
            "fix": status.fix,
            "driver": status.driver,
            "line": status.line(),
        },
        "gpus": [
            {
                "index": s.index,
                **s.metrics(),
                "processes": None
                if s.processes is None
                else [{"pid": p.pid, "used_bytes": p.used_bytes} for p in s.processes],
            }
            for s in snapshot.samples
        ],
    }
