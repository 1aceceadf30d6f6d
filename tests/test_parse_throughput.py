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
        # seconds per iteration before the data loading's share: mmengine
        # (open-mmlab/mmengine#155, AILab-CVC/YOLO-World#190), mmcv 1.x (open-mmlab/mmdetection
        # #2672, open-mmlab/mmpretrain#408), detectron2 (facebookresearch/detectron2#195,
        # facebookresearch/d2go#524) and its newer `last_time` between them
        (
            "04/21 21:03:53 - mmengine - INFO - Epoch(train) [1][10/90]  lr: 1.000e-02  eta: "
            "0:00:25  time: 0.010  data_time: 0.000  memory: 0  loss: 11.4723",
            100.0,
        ),
        (
            "03/25 23:58:44 - mmengine - INFO - Epoch(train) [100][  50/4309]  base_lr: 2.0000e-03"
            " lr: 5.9600e-05  eta: 12:14:32  time: 0.7842  data_time: 0.0205  memory: 7657  "
            "grad_norm: 993.2860  loss: 1111.4113  loss_cls: 399.5985",
            1 / 0.7842,
        ),
        (
            "2020-05-08 18:56:16,649 - mmdet - INFO - Epoch [1][2400/7517]\tlr: 0.00125, eta: "
            "4:33:09, time: 0.595, data_time: 0.032, memory: 6836, loss_rpn_cls: 0.0989, loss: 0.4890",
            1 / 0.595,
        ),
        (
            "2021-08-17 17:00:17,073 - mmcls - INFO - Epoch [1][100/5005]    lr: 1.000e-01, eta: "
            "37 days, 5:46:17, time: 6.430, data_time: 5.762, memory: 3086, loss: 6.8864",
            1 / 6.43,
        ),
        (
            "[11/01 11:27:04 d2.utils.events]: eta: 8:05:12  iter: 1259  total_loss: 1.012  "
            "loss_cls: 0.714  loss_box_reg: 0.291  time: 0.3322  data_time: 0.0334  lr: 0.010000"
            "  max_mem: 3961M",
            1 / 0.3322,
        ),
        (
            "[04/05 01:30:24 d2.utils.events]:  eta: 0:03:35  iter: 19  total_loss: 1.36  "
            "time: 0.3636  last_time: 0.3512  data_time: 0.1102  last_data_time: 0.0934  "
            "lr: 3.8077e-06  max_mem: 433M",
            1 / 0.3636,
        ),
        # nanoGPT's milliseconds per iteration (karpathy/nanoGPT#110, #178, #215)
        ("iter 1631: loss 4.0863, time 561.94ms", 1000 / 561.94),
        ("iter 10: loss 3.2202, time 893.76ms, mfu 16.68%", 1000 / 893.76),
        ("2023-03-22 09:30:39 iter 2920: loss 3.9883, time 1099.34ms, mfu 15.34%", 1000 / 1099.34),
    ],
)
def test_throughput_units(text: str, expected: float) -> None:
    """Keyed rates, rates with their unit after them and per-iteration durations (tqdm's s/it,
    `s/iter`, `sec/step`, Megatron's ms, a loss line's `(3.94s)`, mmengine / mmcv / detectron2's
    `time:` before `data_time:`, nanoGPT's `time 561.94ms`; inverted) are read."""
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
        # a validation pass's own pace (AILab-CVC/YOLO-World#396), other times than an
        # iteration's (dinov2's `iter_time`, detectron2's `last_time` alone, a clock, the data
        # loading alone, an elapsed total), milliseconds of something other than a loss line's
        # iteration
        "2024/06/16 20:02:03 - mmengine - INFO - Epoch(val) [10][4000/4809]    eta: 0:06:54  "
        "time: 0.5256  data_time: 0.0006  memory: 979",
        "03/01 10:00:00 - mmengine - INFO - Epoch(test) [1][50/500]  time: 0.0755  "
        "data_time: 0.0022",
        '{"iteration": 120, "iter_time": 3.6070103645324707, "data_time": 0.935, "total_loss": 14.6}',
        "iter: 19  total_loss: 1.36  last_time: 0.3512  data_time: 0.1102",
        "INFO start time: 12:03:01  data_time: 0.1",
        "iter: 19  total_loss: 1.36  data_time: 0.1102  lr: 0.01",
        "INFO Elapsed time: 3.2  loss: 2.1",
        "2023-03-22 09:32:32 step 3000: train loss 4.0390, val loss 4.0427",
        "ping time 12ms to the storage node",
    ],
)
def test_not_throughput(text: str) -> None:
    """TFLOP/s, HF's run summary and eval rates, look-alike words, bracketed numbers that are
    no iteration's duration, other times than an iteration's and a validation pass's pace
    (fairseq's, mmengine's) are not throughput."""
    assert throughput(text) is None
