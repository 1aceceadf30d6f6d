"""nanoGPT: `iter 100: loss 2.31, time 123.45ms` (the loss and step are generic keys)."""

from __future__ import annotations

from logwatch.parse.dialects.generic import COUNT

# the iteration's time in milliseconds after the loss (inverted into throughput)
MS_AFTER_LOSS = r"(?i:loss)[^|]*\btime:?\s*" + COUNT + r"\s*ms(?-u:\b)"
