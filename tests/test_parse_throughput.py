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
        # fairseq's words per second, in its three log formats (issues #41, #3633, #2201)
        ("| epoch 001  4000 / 331737 loss=6.87 (8.75), wps=18522, wpb=31231, bsz=873", 18522.0),
        ("| epoch 027 | loss 6.343 | nll_loss 4.984 | ppl 31.65 | wps 164346 | ups 0.4", 164346.0),
        (
            '{"epoch": 27, "update": 26.267, "loss": "8.206", "wps": "1195.4", "ups": "1.62"}',
            1195.4,
        ),
        # per-iteration durations, inverted: Megatron (epfLLM/Megatron-LLM#11), Informer
        # (zhouhaoyi/Informer2020#112), TF-slim (tensorflow/models#5817), NiftyNet (#47), caffe
        (
            " iteration      182/  250000 | consumed samples:       186368 | elapsed time per"
            " iteration (ms): 126995.3 | learning rate: 1.365E-05 | lm loss: 2.382640E+00 |",
            1000 / 126995.3,
        ),
        ("        speed: 0.1788s/iter; left time: 165.5299s", 1 / 0.1788),
        ("\tspeed: 0.275s / iter; left time: 3270.9135s", 1 / 0.275),
        ("INFO:tensorflow:global step 327: loss = 3417.7632 (1.193 sec/step)", 1 / 1.193),
        (
            "INFO:niftynet:2018-02-04 06:09:02,375: Training iter 3222, "
            "loss=0.3502005934715271 (63.809136s)",
            1 / 63.809136,
        ),
        (
            "solver.cpp:218] Iteration 2100 (1.01467 iter/s, 98.5545s/100 iters), loss = 9.4",
            1.01467,
        ),
    ],
)
def test_throughput_units(text: str, expected: float) -> None:
    """Keyed rates, rates with their unit after them and per-iteration durations (tqdm's s/it,
    `s/iter`, `sec/step`, Megatron's ms, a loss line's `(3.94s)`; inverted) are read."""
    assert throughput(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    "text",
    [
        "throughput per GPU (TFLOP/s/GPU): 123.4 | lm loss: 2.1",
        "{'train_runtime': 12.3, 'train_samples_per_second': 40.1, 'epoch': 1.0}",
        "{'eval_loss': 2.3, 'eval_samples_per_second': 88.2}",
        "step 5 | loss 2.1 | tflops: 312.5",
        "2024-01-01 12:00:00 INFO loading /data/tps_v2/shard.bin",
        # fairseq's running average in brackets, a duration of something else, a zero duration,
        # fairseq's validation pass (its own pace)
        "| epoch 001  1000 / 331737 loss=9.57 (10.94), wpb=31259, bsz=861",
        "INFO Saved checkpoint to /ckpt/step_500 (3.9s)",
        "        speed: 0.0000s/iter; left time: 0.0000s",
        "| epoch 010 | valid on 'valid' subset | valid loss 1.94 | valid ppl 3.83 | wps 5521.4",
    ],
)
def test_not_throughput(text: str) -> None:
    """TFLOP/s, HF's run summary and eval rates, look-alike words, bracketed numbers that are
    no iteration's duration and fairseq's validation rate are not throughput."""
    assert throughput(text) is None
