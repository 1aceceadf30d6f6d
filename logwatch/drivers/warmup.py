"""A live run's first alert without the process's one-time costs on its path.

The first time a line of a shape, a firing or a resolution goes through the parser and the
rules, polars compiles the regexes of that path and the parser builds its cached expressions:
several milliseconds each, once per process: a fresh engine took 12-14 ms over its first
DFlash step line and 6-12 ms over its first NaN, where warmed-up ones take 3.5-3.7 ms
(BENCHMARKS.md). `warm_up` runs the engine once, at start, over a few lines of the common forms
(each a batch of its own, as a live round reads them) under a scratch source that the engine
then forgets.
"""

from __future__ import annotations

from logwatch.engine import Engine
from logwatch.parse import parse_block
from logwatch.sources.framing import lines_to_series

SCRATCH_SOURCE = "\x00logwatch warm-up"
"""The source the warm-up lines are read as: no path spells it."""

_TS = "2026-01-01 00:00:{s:02d},000 INFO "
_STEP = (
    "[train] step {n}/100 | loss {loss} | acc 0.3 | lr 2.40e-05 | grad_norm 1.23 | "
    "tok/s 48292 | q_hs=19 q_hsb=[1,2,2,6,3,5]"
)
_GPUS = "".join(
    f" gpu/{i}/util=97 gpu/{i}/mem_gb=70.1 gpu/{i}/power_w=600 gpu/{i}/temp_c=65" for i in range(8)
)
_SNAPSHOT = (
    "[wandb] snapshot step={n} prof/target_fwd_ms=212.4 queue/ready_ratio=0.87 "
    "cuda/alloc_gb=61.2" + _GPUS
)
_HF = "{{'loss': {loss}, 'grad_norm': 1.0, 'learning_rate': 2e-05, 'epoch': 0.{n}}}"
_MEGATRON = (
    " iteration {n:8d}/ 20000000 | consumed samples: {n:12d} | elapsed time per iteration (ms):"
    " 3591.8 | learning rate: 1.500E-04 | global batch size:   512 |{rest} number of skipped"
    " iterations:   0 | number of nan iterations:   0 |"
)
_FORMS = (
    _TS + _STEP,
    _TS + "[hsq] q_hsb=[3,4,6,5,7,8] at q_hs={n}",
    _TS + _SNAPSHOT,
    _TS + "[wandb] snapshot step={n} sys/disk_gb=12.5 gpu/0/util=97",  # a key of no spec word
    _HF,
    _MEGATRON.replace("{rest}", " lm loss: {loss} | loss scale: 65536.0 | grad norm: 1.349 |"),
    _MEGATRON.replace("{rest}", " loss scale: 65536.0 |"),  # a skipped iteration
    _TS + "[data] worker 3 prefetched 32 batches (queue 100)",
    _TS + "[train] grad clipping active: norm 12.4 > 1.0",
    "time (ms) | forward-backward: 3361.16 | optimizer: 183.96",
    "step {n} | loss {loss} | grad_norm 1.0",  # no shape: the general path
)
WARM_UP_LINES: tuple[str, ...] = tuple(
    form.format(s=n, n=n, loss=loss)
    for n, loss in enumerate(("2.1", "nan", "2.0"), start=1)
    for form in _FORMS
)
"""Each common form with a finite loss, then a NaN (a firing), then finite again (its end)."""


def warm_up(engine: Engine, columns: frozenset[str] | None) -> None:
    """Run `engine` once over `WARM_UP_LINES`, each its own batch parsed for `columns` as a
    live driver parses it, then forget them (`Engine.rehearse`)."""
    frames = [
        parse_block(
            lines_to_series((line + "\n").encode()),
            source=SCRATCH_SOURCE,
            first_line=number,
            default_year=2026,
            columns=columns,
        ).frame
        for number, line in enumerate(WARM_UP_LINES, start=1)
    ]
    engine.rehearse(frames, columns)
