"""The fleet post-mortem: every rank's log of a large run, the first failing rank named, each
NCCL cascade folded into one line (`verdict.py`: which rank; `render.py`: how it reads)."""
