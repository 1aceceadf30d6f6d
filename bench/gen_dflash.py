"""Generate a large DFlash-style training log for benchmarks (deterministic, fast).

Usage: python bench/gen_dflash.py OUT.log [--mb 700]
"""

from __future__ import annotations

import argparse
import random
from datetime import datetime, timedelta
from pathlib import Path

CHATTER = [
    "INFO [data] worker {w} prefetched 64 batches (queue 128)",
    "WARNING [data] worker {w} slow: 2.{w}s to fetch batch (threshold 2.0s)",
    "INFO [ckpt] saved checkpoint to /workspace/ckpt/step_{s} (3.1 GB) in 12.4s",
    "DEBUG [drafter] worker {w} synced weights v{s}",
]
GPUS = 8  # per telemetry snapshot, as in the spec's run


def lines(rng: random.Random, start: datetime, count: int, first: int = 0) -> list[str]:
    """`count` log lines starting at `start`: one in ten a telemetry snapshot, with NaN episodes,
    starvation streaks and NVML-off stretches."""
    out = []
    now = start
    step = 1
    for i in range(first, first + count):
        now += timedelta(milliseconds=rng.randint(50, 900))
        ts = now.strftime("%Y-%m-%d %H:%M:%S,") + f"{now.microsecond // 1000:03d}"
        kind = rng.random()
        starving = (i // 5000) % 40 == 7
        q = [0, 0, 0, 0, 0, 31] if starving else [rng.randint(0, 9) for _ in range(6)]
        if kind < 0.70:
            # A NaN episode: a few consecutive NaN steps every 250 000 lines.
            loss = "nan" if 1000 <= i % 250_000 < 1040 else f"{rng.uniform(0.8, 3.5):.4f}"
            out.append(
                f"{ts} INFO [train] step {step}/2000000 | loss {loss} | acc {rng.uniform(0.2, 0.5):.3f} | "
                f"lr 2.40e-05 | grad_norm {rng.uniform(0.5, 3):.2f} | tok/s {rng.randint(48000, 53000)} | "
                f"q_hs={sum(q)} q_hsb=[{','.join(map(str, q))}]"
            )
            step += 1
        elif kind < 0.80:
            out.append(f"{ts} INFO [hsq] q_hsb=[{','.join(map(str, q))}] at q_hs={sum(q)}")
        elif kind < 0.90:
            # The spec's run: 8 GPUs, 4 metrics each; NVML-off stretches have no gpu/ keys.
            nvml_off = (i // 5000) % 40 == 23
            gpus = (
                ""
                if nvml_off
                else " "
                + " ".join(
                    f"gpu/{g}/util={rng.randint(90, 99)} gpu/{g}/mem_gb={rng.uniform(69, 72):.1f} "
                    f"gpu/{g}/power_w={rng.randint(560, 640)} gpu/{g}/temp_c={rng.randint(60, 72)}"
                    for g in range(GPUS)
                )
            )
            out.append(
                f"{ts} INFO [wandb] snapshot step={step} prof/target_fwd_ms=212.4 prof/drafter_ms=88.1 "
                f"queue/ready_ratio=0.87 queue/full_ratio=0.02 worker/3/seqs=1288 "
                f"cuda/alloc_gb=61.2 cuda/reserved_gb=70.4{gpus}"
            )
        else:
            out.append(f"{ts} " + rng.choice(CHATTER).format(w=rng.randint(0, 7), s=step))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--mb", type=int, default=700)
    args = parser.parse_args()
    rng = random.Random(42)
    target = args.mb * 1_000_000
    written = 0
    first = 0
    start = datetime(2026, 11, 1, 0, 0, 0)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        while written < target:
            block = "\n".join(lines(rng, start, 50_000, first)) + "\n"
            first += 50_000
            start += timedelta(hours=6)
            f.write(block)
            written += len(block)
    print(f"{args.out}: {written / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
