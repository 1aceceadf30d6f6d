"""Megatron-LM and NeMo: what the generic keys (`lm loss`, `grad norm`, `iteration`) miss."""

from __future__ import annotations

from logwatch.parse.dialects.generic import COUNT

# Megatron drops NaN iterations from the averaged `lm loss`; only this count shows them.
NAN_ITERATIONS = r"number of nan iterations:\s*(\d+)"
# Megatron-Core's NaN checker raises instead of logging the value; the loss's and the grad
# norm's forms end in `forward loss` and `grad norm`.
MEGATRON_NAN = r"Unexpected result ([-+]?(?i:nan|inf))\b[^\n]*found (?i:nan|inf) in local "
MEGATRON_NAN_LITERAL = "Unexpected result"
# NeMo's own training loss: primary over Lightning's running `loss=` on the same line.
NEMO_LOSS_KEY = "reduced_train_loss"
# Megatron's pace, milliseconds per iteration (inverted into throughput).
MS_PER_IT = r"elapsed time per iteration \(ms\):\s*" + COUNT
