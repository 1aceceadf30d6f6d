"""GPU side of logwatch: NVML reads, samples as polars frames, GPU rules, and the join with logs.

Nothing here imports pynvml at module level; `logwatch.gpu.nvml` loads it when a reader starts.
"""
