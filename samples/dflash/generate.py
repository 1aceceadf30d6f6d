"""Regenerate the DFlash sample logs (deterministic). Run: python samples/dflash/generate.py

Each log gets a `logwatch test` file beside it (`X.test.toml`, see samples/sample_tests.py): the
alerts that replay must produce, and nothing else, fail2ban-style.
"""

from __future__ import annotations

import random
import sys
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from sample_tests import render  # noqa: E402  # samples/ holds the test-file writer, not a package


class Log:
    def __init__(self, name: str, start: datetime, seed: int) -> None:
        self.name, self.now, self.rng = name, start, random.Random(seed)
        self.lines: list[str] = []
        self.expect: list[tuple[int, str, str, str]] = []

    def at(self, seconds: float) -> str:
        self.now += timedelta(seconds=seconds)
        return self.now.strftime("%Y-%m-%d %H:%M:%S,") + f"{self.now.microsecond // 1000:03d}"

    def add(self, text: str, seconds: float = 0.0) -> int:
        self.lines.append(f"{self.at(seconds)} {text}")
        return len(self.lines)

    def raw(self, text: str) -> int:
        self.lines.append(text)
        return len(self.lines)

    def want(self, line: int, rule: str, status: str, why: str) -> None:
        self.expect.append((line, rule, status, why))

    def header(self, run_id: str, pid: int) -> None:
        self.add(f"INFO [train] run start: run_id={run_id} pid={pid} gpus=8 target=Qwen/Qwen3-8B drafter=dflash-b16")
        self.add("INFO [train] HS queue: 90 (min_ready=30)")

    def step(self, step: int, loss: str, grad: str = "", q: list[int] | None = None) -> int:
        q = q or self.buckets()
        grad = grad or f"{self.rng.uniform(0.8, 2.5):.2f}"
        return self.add(
            f"INFO [train] step {step}/200000 | loss {loss} | acc {self.rng.uniform(0.2, 0.4):.3f} | "
            f"lr 2.40e-05 | grad_norm {grad} | tok/s {self.rng.randint(48000, 53000)} | "
            f"q_hs={sum(q)} q_hsb=[{','.join(map(str, q))}]",
            seconds=self.rng.uniform(3.5, 4.5),
        )

    def buckets(self) -> list[int]:
        return [self.rng.randint(1, 9) for _ in range(6)]

    def queue(self, q: list[int], spaced: bool = False) -> int:
        body = (", " if spaced else ",").join(map(str, q))
        return self.add(f"INFO [hsq] q_hsb=[{body}] at q_hs={sum(q)}", seconds=0.3)

    def snapshot(self, step: int, gpus: bool) -> int:
        parts = [
            f"prof/target_fwd_ms={self.rng.uniform(200, 220):.1f}",
            f"prof/drafter_ms={self.rng.uniform(80, 95):.1f}",
            f"queue/ready_ratio={self.rng.uniform(0.7, 0.95):.2f}",
            "queue/full_ratio=0.02",
            f"worker/3/seqs={1200 + step}",
            "cuda/alloc_gb=61.2 cuda/reserved_gb=70.4",
        ]
        if gpus:
            for g in range(8):
                parts.append(
                    f"gpu/{g}/util={self.rng.randint(90, 99)} gpu/{g}/mem_gb={self.rng.uniform(68, 72):.1f} "
                    f"gpu/{g}/power_w={self.rng.randint(560, 640)} gpu/{g}/temp_c={self.rng.randint(60, 72)}"
                )
        return self.add(f"INFO [wandb] snapshot step={step} " + " ".join(parts), seconds=0.1)

    def write(self) -> None:
        (HERE / self.name).write_text("\n".join(self.lines) + "\n", encoding="utf-8")
        test_file = HERE / (self.name.removesuffix(".log") + ".test.toml")
        test_file.write_text(render(self.name, self.expect), encoding="utf-8")


def healthy() -> None:
    log = Log("train_healthy.log", datetime(2026, 11, 28, 9, 0, 3, 118000), 1)
    log.header("healthy1", 39120)
    log.add("INFO [data] loaded 1,204,332 samples from /data/dflash/shards (32 shards)")
    for step in range(10, 1210, 10):
        log.step(step, f"{max(0.9, 4.2 - step / 400 + log.rng.uniform(-0.05, 0.05)):.4f}")
        if step % 30 == 0:
            log.queue(log.buckets(), spaced=step % 60 == 0)
        if step % 50 == 0:
            log.snapshot(step, gpus=True)
        if step == 400:
            log.add("WARNING [data] worker 3 slow: 2.1s to fetch batch (threshold 2.0s)")
            log.raw("  10%|█         | 120/1200 [00:40<06:00,  3.00it/s]\r  11%|█         | 132/1200 [00:44<05:56,  3.00it/s]\r  12%|█▏        | 144/1200 [00:48<05:52,  3.00it/s]")
        if step == 700:
            log.add("INFO [ckpt] saved checkpoint to /workspace/ckpt/step_700 (3.1 GB) in 12.4s")
    log.write()


def nan_run() -> None:
    log = Log("train_nan.log", datetime(2026, 11, 28, 14, 2, 3, 118000), 2)
    log.header("slammed2", 40211)
    for step in range(1300, 1403):
        log.step(step, f"{2.1 + (step - 1300) * 0.01 + log.rng.uniform(-0.02, 0.02):.4f}")
        if step % 25 == 0:
            log.queue(log.buckets())
    line = log.step(1403, "nan", grad="inf", q=[3, 7, 9, 9, 8, 8])
    log.want(line, "nan-loss", "firing", "loss nan at step 1403")
    log.want(line, "nan-grad", "firing", "grad_norm inf at step 1403")
    log.queue([3, 7, 9, 9, 8, 8])
    log.step(1404, "NaN", grad="nan")
    log.add("WARNING [train] non-finite loss, skipping optimizer step")
    log.step(1405, "-nan", grad="nan")
    line = log.step(1406, "3.9120", grad="1.98e+01")
    log.want(line, "nan-loss", "resolved", "loss finite again at step 1406")
    log.want(line, "nan-grad", "resolved", "grad_norm finite again")
    for step in range(1407, 1430):
        log.step(step, f"{3.9 - (step - 1407) * 0.02:.4f}")
    line = log.step(1430, "inf", grad="3.1")
    log.want(line, "nan-loss", "firing", "loss +inf at step 1430 (a second episode)")
    log.add("ERROR [train] loss diverged; stopping. Last good checkpoint: /workspace/ckpt/step_1400")
    log.raw("Traceback (most recent call last):")
    log.raw('  File "/workspace/dflash/train.py", line 812, in <module>')
    log.raw("    main()")
    log.raw("RuntimeError: loss is not finite: inf")
    log.write()


def starvation() -> None:
    log = Log("train_starved.log", datetime(2026, 11, 29, 8, 30, 0, 5000), 3)
    log.header("starve1", 51002)
    for step in range(100, 400, 10):
        log.step(step, f"{3.0 - step / 1000:.4f}")
        log.queue(log.buckets())
    # The queue drains to the longest bucket only: four reports, then a recovery (no alert).
    for step in range(400, 440, 10):
        log.step(step, "2.6012", q=[0, 0, 0, 0, 0, 31])
    log.queue([0, 0, 2, 0, 0, 29])
    # Then a real starvation: step lines and queue reports both count as reports.
    first = None
    for i, step in enumerate(range(440, 520, 10)):
        line = log.step(step, f"{2.6 + i * 0.01:.4f}", q=[0, 0, 0, 0, 0, 31 + i])
        first = first or line
        line2 = log.queue([0, 0, 0, 0, 0, 31 + i], spaced=True)
        if i == 2:
            log.want(line, "bucket-starvation", "firing", "5th consecutive single-bucket report (step 460)")
    line = log.queue([0, 4, 0, 0, 0, 40])
    log.want(line, "bucket-starvation", "resolved", "two non-zero buckets again")
    for step in range(520, 560, 10):
        log.step(step, "2.5500")
    log.write()


def nvml_disabled() -> None:
    """The train_slammed4.log story: pynvml missing, telemetry silently off for hours."""
    log = Log("train_slammed4.log", datetime(2026, 11, 28, 14, 2, 3, 118000), 4)
    log.header("slammed4", 41626)
    line = log.add(
        "WARNING [telemetry] NVML unavailable (No module named 'pynvml'); GPU telemetry disabled",
        seconds=1.4,
    )
    log.want(line, "nvml-disabled", "firing", "the script says NVML is off at start-up")
    log.add("INFO [data] loaded 1,204,332 samples from /data/dflash/shards (32 shards)")
    count = 0
    for step in range(10, 610, 10):
        log.step(step, f"{max(1.0, 4.1 - step / 300):.4f}")
        if step % 40 == 0:
            log.queue(log.buckets())
        if step % 50 == 0:
            line = log.snapshot(step, gpus=False)
            count += 1
            if count == 3:
                log.want(line, "gpu-metrics-missing", "firing", "3rd snapshot without gpu/ keys")
    log.write()


def restarted() -> None:
    """A run restarted into the same file: the old run's alerts end, the new run is fresh."""
    log = Log("train_restarted.log", datetime(2026, 11, 30, 6, 0, 0, 0), 5)
    log.header("restart1", 60001)
    for step in range(10, 100, 10):
        log.step(step, f"{3.0 - step / 200:.4f}")
    line = log.raw("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 139.80 GiB of which 1.12 GiB is free.")
    log.want(line, "cuda-oom", "firing", "OOM ends the first run")
    log.raw("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total capacity of 139.80 GiB of which 1.01 GiB is free.")
    line = log.add("INFO [train] run start: run_id=restart2 pid=60877 gpus=8 target=Qwen/Qwen3-8B drafter=dflash-b16", seconds=300)
    log.want(line, "cuda-oom", "resolved", "the run restarted into the same file")
    log.add("INFO [train] HS queue: 90 (min_ready=30)")
    for step in range(10, 60, 10):
        log.step(step, f"{3.0 - step / 200:.4f}")
    log.raw("[rank2]:[E1130 06:31:02.118000 60877 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5120, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.")
    log.want(len(log.lines), "nccl-timeout", "firing", "NCCL watchdog on rank 2")
    log.raw("[rank5]:[E1130 06:31:02.120000 60880 ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5120, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600033 milliseconds before timing out.")
    log.raw("[Mon Nov 30 06:31:40 2026] NVRM: Xid (PCI:0000:44:00): 79, pid=60880, name=python, GPU has fallen off the bus.")
    log.want(len(log.lines), "gpu-lost", "firing", "Xid 79 in the kernel log")
    log.write()


if __name__ == "__main__":
    for make in (healthy, nan_run, starvation, nvml_disabled, restarted):
        make()
