"""OpenNMT-py: its training loss is `xent` (its ppl is exp(xent))."""

from __future__ import annotations

from logwatch.parse.dialects.generic import END, NUMBER, PADDING, SEP

XENT_PATTERN = r"(?-u:\b)(?:([A-Za-z]+) )?xent" + SEP + "(" + NUMBER + ")" + PADDING + END
