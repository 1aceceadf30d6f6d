"""mmengine / mmcv / xtuner and detectron2: bracketed steps and the iteration's time."""

from __future__ import annotations

from logwatch.parse.dialects.generic import COUNT

# mmengine `Iter(train) [ 510/2046]`, `Epoch(train) [1][ 50/1000]`; mmcv `Epoch [1][200/62598]`
BRACKET_STEP_PATTERN = (
    r"(?i:iter|epoch)(?:\(train\))?\s*(?:\[\s*\d+\s*\])?\s*\[\s*(\d+)\s*/\s*\d+\s*\]"
)
# mmengine `time: 1.3447  data_time: 0.0181`, mmcv 1.x `time: 0.825, data_time: 0.053`,
# detectron2 `time: 0.4093  last_time: 0.4011  data_time: 0.0012`: the key `time` alone (not
# `last_time`, `eta`), then the data time, so a clock (`time: 12:03:01`) or an elapsed total is not
# read
SECONDS_BEFORE_DATA = (
    r"(?:^|[\s,|])time:\s*" + COUNT + r"[,\s]+(?:last_time:\s*[\d.]+[,\s]+)?data_time:"
)
