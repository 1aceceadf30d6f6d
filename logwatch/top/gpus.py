"""The GPU lines of `logwatch top`: each GPU's latest sample with the runs whose processes are on it."""

from __future__ import annotations

from collections.abc import Sequence

from logwatch.gpu.model import GpuSample
from logwatch.gpu.procs import with_descendants
from logwatch.top.view import GpuRow


def gpu_rows(
    samples: Sequence[GpuSample], run_pids: dict[str, int], runs: dict[str, str]
) -> tuple[GpuRow, ...]:
    """The GPU table's rows: each GPU's latest sample and the runs whose process tree is on it."""
    trees = {source: with_descendants([pid]) for source, pid in run_pids.items()}
    out = []
    for s in samples:
        pids = {p.pid for p in s.processes or ()}
        on_it = sorted({runs.get(src, src) for src, tree in trees.items() if tree & pids})
        out.append(
            GpuRow(
                index=s.index,
                name=s.name,
                util=s.util_gpu,
                mem_used_bytes=s.mem_used_bytes,
                mem_total_bytes=s.mem_total_bytes,
                power_w=s.power_w,
                temp_c=s.temp_c,
                ecc=s.ecc_uncorrected,
                lost=s.lost,
                runs=tuple(on_it),
            )
        )
    return tuple(out)
