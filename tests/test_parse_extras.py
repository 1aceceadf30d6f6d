"""The `epoch` and `metrics` columns: what real trainers print, and `metrics` only when asked."""

from __future__ import annotations

import polars as pl
import pytest

from logwatch.parse import parse_lines

DFLASH = (
    "2026-11-28 14:02:07,199 INFO [train] step 1300/200000 | loss 2.1182 | acc 0.242 | "
    "lr 2.40e-05 | grad_norm 1.23 | tok/s 48292 | q_hs=19 q_hsb=[1,2,2,6,3,5]"
)
FAIRSEQ = (
    "2021-03-01 10:00:27 | INFO | train_inner | epoch 001:    100 / 5000 loss=13.512, "
    "nll_loss=13.344, ppl=10397.87, num_updates=98, lr=1.225e-05, gnorm=3.012"
)


def _row(text: str, *, metrics: bool = True) -> dict[str, object]:
    frame = parse_lines(pl.Series([text]), source="t", first_line=1, metrics=metrics)
    return frame.row(0, named=True)


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        ("{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.01}", 0.01),
        (FAIRSEQ, 1.0),
        (
            "[INFO] [timer.py:260:stop] epoch=0/micro_step=40/global_step=40, CurrSamplesPerSec=233.57",
            0.0,
        ),
        ("Epoch(train) [3][ 50/1000]  lr: 1.0e-04  loss: 0.93", 3.0),
        ("step 12 | loss 2.3", None),
    ],
)
def test_epoch(text: str, epoch: float | None) -> None:
    """HF, fairseq, DeepSpeed and mmengine epochs; none where the line has none."""
    assert _row(text)["epoch"] == epoch


def test_metrics_are_the_other_numeric_pairs_of_a_step_line() -> None:
    """DFlash `| key value` fields and fairseq `key=value` pairs, minus step/loss/lr/grad norm."""
    assert _row(DFLASH)["metrics"] == [
        {"key": "acc", "value": 0.242},
        {"key": "tok/s", "value": 48292.0},
    ]
    keys = [m["key"] for m in _row(FAIRSEQ)["metrics"]]  # type: ignore[attr-defined]
    assert keys == ["nll_loss", "ppl", "num_updates", "gnorm"]


def test_metrics_stay_null_unless_asked_and_off_step_lines() -> None:
    """Rules never read `metrics`: replay's rule path parses without it; chatter has none."""
    assert _row(DFLASH, metrics=False)["metrics"] is None
    assert _row("2026-11-28 14:02:03,118 INFO HS queue: 90 (min_ready=30)")["metrics"] is None


def test_throughput_units() -> None:
    """The `throughput` column the report plots: tok/s, tokens_per_sec, samples/sec and tqdm's
    it/s; HF's end-of-training `train_samples_per_second` summary is not a step's rate."""
    texts = [DFLASH, "tokens_per_sec=1.2e5", "train_samples_per_second: 3.1", "samples/sec=233.5"]
    texts += ["100%|###| 10/10 [00:01<00:00, 3.21it/s]", "no rate here"]
    frame = parse_lines(pl.Series(texts), source="t.log", first_line=1)
    assert frame.get_column("throughput").to_list() == [48292.0, 120000.0, None, 233.5, 3.21, None]
