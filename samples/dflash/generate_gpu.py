"""Regenerate the GPU sample log (deterministic). Run: python samples/dflash/generate_gpu.py

train_gpu_trouble.log: a DFlash run whose telemetry snapshots carry gpu/ keys, in which the
drafter GPU 7 starves (under 10% for over 5 minutes while the log advances), GPU 2 runs hot
(>= 85 C for over 2 minutes) and GPU 5 fills its memory (> 97% for over 2 minutes). This
script's snapshots also log `mem_total_gb`, which the memory rule needs from a log alone.
"""

from __future__ import annotations

import random
import sys
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from sample_tests import render  # noqa: E402  # samples/ holds the test-file writer, not a package

TOTAL_GB = 139.8


def main() -> None:
    rng = random.Random(5)
    now = datetime(2026, 11, 28, 16, 0, 0)
    lines: list[str] = []
    expect: list[tuple[int, str, str, str]] = []

    def add(text: str, seconds: float) -> int:
        nonlocal now
        now += timedelta(seconds=seconds)
        lines.append(f"{now:%Y-%m-%d %H:%M:%S},{now.microsecond // 1000:03d} {text}")
        return len(lines)

    add(
        "INFO [train] run start: run_id=gputrouble pid=51200 gpus=8 target=Qwen/Qwen3-8B drafter=dflash-b16",
        0,
    )
    add("INFO [train] HS queue: 90 (min_ready=30)", 0.002)
    fired: dict[str, int] = {}
    for i in range(1, 61):  # a snapshot every ~20 s: 20 minutes
        step = i * 50
        add(
            f"INFO [train] step {step}/200000 | loss {4.0 - i * 0.01:.4f} | acc 0.300 | lr 2.40e-05 | "
            f"grad_norm 1.20 | tok/s {rng.randint(48000, 53000)} | q_hs=30 q_hsb=[5,5,5,5,5,5]",
            19.9,
        )
        gpus = []
        for g in range(8):
            util = 3 if (g == 7 and 10 <= i < 40) else rng.randint(90, 99)
            temp = 88 if (g == 2 and 20 <= i < 32) else rng.randint(60, 72)
            mem = 137.5 if (g == 5 and 30 <= i < 45) else round(rng.uniform(68, 71), 1)
            gpus.append(
                f"gpu/{g}/util={util} gpu/{g}/mem_gb={mem} gpu/{g}/mem_total_gb={TOTAL_GB} "
                f"gpu/{g}/power_w={rng.randint(560, 640)} gpu/{g}/temp_c={temp}"
            )
        line = add(
            f"INFO [wandb] snapshot step={step} prof/target_fwd_ms=210.0 queue/ready_ratio=0.9 "
            + " ".join(gpus),
            0.1,
        )
        for rule, gpu, first, last, hold in (
            ("gpu-idle", 7, 10, 40, 300),
            ("gpu-hot", 2, 20, 32, 120),
            ("gpu-memory-high", 5, 30, 45, 120),
        ):
            if first <= i < last and rule not in fired and (i - first) * 20 >= hold:
                fired[rule] = line
                expect.append((line, rule, "firing", f"GPU {gpu} held the condition for {hold}s"))
            if i == last:
                expect.append((line, rule, "resolved", f"GPU {gpu} back to normal"))
    (HERE / "train_gpu_trouble.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (HERE / "train_gpu_trouble.test.toml").write_text(
        render("train_gpu_trouble.log", expect), encoding="utf-8"
    )

if __name__ == "__main__":
    main()
