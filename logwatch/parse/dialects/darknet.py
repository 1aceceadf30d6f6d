"""darknet / YOLO: positional values, no keys."""

from __future__ import annotations

from logwatch.parse.dialects.generic import NUMBER

# ` 74: -nan, -nan avg loss, 0.000100 rate, ...` (batch: loss, running average, learning rate);
# pjreddie's older form prints `avg,` without `loss`. Its ` 74: ` is the batch number, not an
# `srun --label` rank prefix.
DARKNET_PATTERN = (
    r"^\s*(\d+): (" + NUMBER + "), (" + NUMBER + r") avg(?: loss)?, (" + NUMBER + ") rate, "
)
