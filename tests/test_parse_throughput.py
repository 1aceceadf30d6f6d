"""The `throughput` column: work per second in every unit trainers print, and nothing else."""

from __future__ import annotations

import polars as pl
import pytest

from logwatch.parse import parse_lines


def throughput(text: str) -> float | None:
    """The parsed throughput of one line."""
    frame = parse_lines(pl.Series([text]), source="t.log", first_line=1, default_year=2026)
    value: float | None = frame.get_column("throughput")[0]
    return value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("steps: 10 loss: 2.2931 iter time (s): 0.548 samples/sec: 233.577", 233.577),
        ("Epoch 0:  40%|████      | 401/1000 [00:40<01:01,  9.80it/s, v_num=12]", 9.8),
        ("[rank0]:[titan] step:  1  loss: 12.2501  tps: 1,321  tflops: 76.51  mfu: 3.1%", 1321.0),
        (" 12%|#2   | 50/400 [01:10<08:11,  4.00s/it]", 0.25),
        (
            "epoch=0/global_step=40, RunningAvgSamplesPerSec=232.51, CurrSamplesPerSec=233.57",
            233.57,
        ),
        ("step 5 | loss 2.1 | 15,234 tok/s", 15234.0),
        ("iter 100 | tokens/s: 48211.5 | loss 3.2", 48211.5),
        ("{'loss': 2.1, 'tokens_per_second': 9120.4}", 9120.4),
    ],
)
def test_throughput_units(text: str, expected: float) -> None:
    """Keyed rates, rates with their unit after them and tqdm's s/it (inverted) are read."""
    assert throughput(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    "text",
    [
        "throughput per GPU (TFLOP/s/GPU): 123.4 | lm loss: 2.1",
        "{'train_runtime': 12.3, 'train_samples_per_second': 40.1, 'epoch': 1.0}",
        "{'eval_loss': 2.3, 'eval_samples_per_second': 88.2}",
        "step 5 | loss 2.1 | tflops: 312.5",
        "2024-01-01 12:00:00 INFO loading /data/tps_v2/shard.bin",
    ],
)
def test_not_throughput(text: str) -> None:
    """TFLOP/s, HF's run summary and eval rates, and look-alike words are not throughput."""
    assert throughput(text) is None
