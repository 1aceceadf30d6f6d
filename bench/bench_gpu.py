"""CPU cost of the GPU sampler, with the stand-in libnvidia-ml.so.1 (tests/fakenvml).

Run: .venv/bin/python bench/bench_gpu.py [--gpus 8] [--rounds 400]

Measures process CPU time (all threads) of:
  - baseline: the bare pynvml calls of one round (the same 8 metric calls per device, no logic);
  - one sampling round through GpuSampler.poll (worker thread, timeout, per-metric bookkeeping);
  - the GPU rules (GpuMonitor.process) on one round's frame;
and from them the share of one core at the default 5 s interval. The stand-in answers from
memory, so real NVML calls (driver ioctls) cost more: read the ratios, and time the real
device with `logwatch gpu` where one is at hand.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from logwatch.gpu.monitor import GpuMonitor
from logwatch.gpu.nvml import NvmlReader
from logwatch.gpu.sampler import GpuSampler
from logwatch.rules.loader import builtin_rules_dir, load_rules
from tests.fakenvml.build import build, write_control

INTERVAL_S = 5.0


def cpu(fn: object, rounds: int) -> float:
    """CPU seconds per call of fn, over `rounds` calls."""
    start = time.process_time()
    for _ in range(rounds):
        fn()  # type: ignore[operator]
    return (time.process_time() - start) / rounds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(Path(tmp))
        control = Path(tmp) / "ctl"
        values: dict[str, object] = {"count": args.gpus}
        for g in range(args.gpus):
            values |= {
                f"g{g}.util": 95,
                f"g{g}.mem_used": 70 << 30,
                f"g{g}.power_mw": 600000,
                f"g{g}.temp": 65,
                f"g{g}.pids": "41626:1000",
            }
        write_control(control, values)
        os.environ["FAKE_NVML_CONTROL"] = str(control)
        ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
        import pynvml

        reader = NvmlReader()
        sampler = GpuSampler(reader, interval_s=INTERVAL_S)
        assert sampler.init().available
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(args.gpus)]

        def bare() -> None:
            for h in handles:
                pynvml.nvmlDeviceGetUtilizationRates(h)
                pynvml.nvmlDeviceGetMemoryInfo(h)
                pynvml.nvmlDeviceGetPowerUsage(h)
                pynvml.nvmlDeviceGetEnforcedPowerLimit(h)
                pynvml.nvmlDeviceGetTemperature(h, 0)
                pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
                pynvml.nvmlDeviceGetTotalEccErrors(h, 1, 0)
                pynvml.nvmlDeviceGetComputeRunningProcesses_v3(h)

        monitor = GpuMonitor(load_rules([builtin_rules_dir()]))
        sampler.poll()
        frame = sampler.drain()

        bare()  # warm caches
        base = cpu(bare, args.rounds)
        poll = cpu(sampler.poll, args.rounds)
        sampler.drain()
        rules = cpu(lambda: monitor.process(frame, run_pids={41626}), max(args.rounds // 4, 20))
        sampler.close()
    total = poll + rules
    print(f"GPUs: {args.gpus} (stand-in libnvidia-ml.so.1), rounds: {args.rounds}")
    print(f"bare pynvml calls, one round:      {base * 1e3:8.3f} ms CPU  (baseline, 1.00x)")
    print(
        f"GpuSampler.poll, one round:        {poll * 1e3:8.3f} ms CPU  ({poll / base:.2f}x baseline)"
        f", {poll / args.gpus * 1e6:.0f} us per device"
    )
    print(
        f"GpuMonitor.process, one round:     {rules * 1e3:8.3f} ms CPU  ({rules / base:.2f}x baseline)"
    )
    print(
        f"at the default {INTERVAL_S:g} s interval:       {total / INTERVAL_S * 100:8.4f} % of one core"
        f" (target < 0.5 %)"
    )


if __name__ == "__main__":
    main()
