"""PyTorch Lightning (and tqdm bars): per-epoch aggregates are not the step's loss."""

from __future__ import annotations

# Lightning's `train_loss_epoch` averages the past epoch: after one NaN step it stays NaN for the
# whole next epoch, so on a line with the step's own loss it does not make that loss NaN.
AGGREGATE = r"(?i)[_/]epoch$"
