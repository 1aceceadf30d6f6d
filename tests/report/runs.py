"""Three runs a day apart, the second resumed from the first's checkpoint: the logs a
post-mortem compares (`train_a.log` holds run r1; `train_b.log` holds r2 and, after a
`run start:` a day later, r3)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

DAY1 = datetime(2026, 11, 26, 9, 0, 0)


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S,") + f"{when.microsecond // 1000:03d}"


def _run(
    start: datetime, run: str, steps: range, extra: str = "", decay: float = 0.9999
) -> list[str]:
    """A run's lines: its header, a step line every 50 steps, a queue report and a GPU
    snapshot (2 GPUs) every 500 steps."""
    lines = [f"{_stamp(start)} INFO [train] run start: run_id={run} pid=4242 gpus=2{extra}"]
    for n, step in enumerate(steps):
        when = start + timedelta(seconds=5 + 4 * n)
        loss = 4.0 * decay**step + 0.3 + 0.01 * (n % 7)
        lines.append(
            f"{_stamp(when)} INFO [train] step {step}/200000 | loss {loss:.4f} | "
            f"lr {2.4e-5 * (1 - step / 40000):.2e} | grad_norm {1.1 + (n % 5) / 10:.2f} | "
            f"tok/s {50000 + 37 * (n % 11)} | q_hs={20 + n % 9} q_hsb=[1,2,{n % 4},5,5,{n % 6}]"
        )
        if step % 500 == 0:
            gpus = " ".join(
                f"gpu/{g}/util={90 + (n + g) % 9} gpu/{g}/mem_gb={60 + g}.5 "
                f"gpu/{g}/power_w={580 + 3 * (n % 7)} gpu/{g}/temp_c={60 + (n + g) % 8}"
                for g in range(2)
            )
            lines.append(f"{_stamp(when)} INFO [wandb] snapshot step={step} {gpus}")
            lines.append(
                f"{_stamp(when)} INFO [hsq] q_hsb=[1,2,2,5,5,{n % 9}] at q_hs={25 + n % 5}"
            )
    return lines


def three_runs(folder: Path) -> list[Path]:
    """r1 (steps 0..14,000, crashed), r2 a day later resumed from r1's checkpoint at step
    12,000 (to 26,000), r3 a day after that from scratch (0..20,000) in the same file."""
    r1 = _run(DAY1, "r1", range(0, 14_001, 50))
    r1 += [
        "Traceback (most recent call last):",
        '  File "/workspace/dflash/train.py", line 812, in <module>',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    r2 = _run(DAY1 + timedelta(days=1), "r2", range(12_000, 26_001, 50), " resume=ckpt-12000")
    r3 = _run(DAY1 + timedelta(days=2), "r3", range(0, 20_001, 50), decay=0.99985)
    a, b = folder / "train_a.log", folder / "train_b.log"
    a.write_text("\n".join(r1) + "\n", encoding="utf-8")
    b.write_text("\n".join(r2 + r3) + "\n", encoding="utf-8")
    return [a, b]
