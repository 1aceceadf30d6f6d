"""The fleet post-mortem as people read it: the verdict first, each NCCL cascade one line, a
row per host (`render.py`); the verdict itself is `logwatch.drivers.verdict`'s."""
