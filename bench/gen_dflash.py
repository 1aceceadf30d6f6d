"""Generate large training logs for benchmarks (deterministic: seeded, same bytes every time).

Usage: python bench/gen_dflash.py OUT.log [--mb N] [--trainer dflash|hf|megatron]
                                          [--kind realistic|simple]

--trainer dflash (default) writes a DFlash log as the run in ../shared/spec/dflash-log.md writes
it (`--kind realistic`, the default; issue 30): by lines about 55 % step lines, 20 % `[hsq]`
queue reports, 12 % data-loader lines, 10 % `[wandb] snapshot` lines with 8 GPUs each (about
40 % of the bytes), 3 % warnings; a `run start:` header (a restart into the same file) every
~30 000 lines; one run in four diverges and logs a non-finite loss from about a fifth of the way
in until its restart (about 20 % of the step lines, in long episodes); starvation streaks
(`q_hsb=[0,0,0,0,0,31]` report after report); one run in ten without NVML (its snapshots have
no `gpu/` keys). `--kind simple` writes the earlier benchmark file (few line families, 24 NaN
lines per 250 000, no restart), kept for comparison.
--trainer hf: a Hugging Face Trainer log: loss dicts between tqdm `\\r` redraws, evals and
checkpoints, two NaN stretches (15 % and 1 % of the dicts). --trainer megatron: Megatron-LM
`iteration N/ M | ...` lines with timers, validation, checkpoints, skipped iterations (loss-scale
back-off) and two NaN/INF stretches. Default size: 730 MB for DFlash, 300 MB for the others.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

CHATTER = [
    "INFO [data] worker {w} prefetched 64 batches (queue 128)",
    "WARNING [data] worker {w} slow: 2.{w}s to fetch batch (threshold 2.0s)",
    "INFO [ckpt] saved checkpoint to /workspace/ckpt/step_{s} (3.1 GB) in 12.4s",
    "DEBUG [drafter] worker {w} synced weights v{s}",
]
GPUS = 8  # per telemetry snapshot, as in the spec's run
DEFAULT_MB = {"dflash": 730, "hf": 300, "megatron": 300}


def lines(rng: random.Random, start: datetime, count: int, first: int = 0) -> list[str]:
    """`count` lines of the simple file starting at `start`: one in ten a telemetry snapshot,
    with NaN episodes, starvation streaks and NVML-off stretches."""
    out = []
    now = start
    step = 1
    for i in range(first, first + count):
        now += timedelta(milliseconds=rng.randint(50, 900))
        ts = now.strftime("%Y-%m-%d %H:%M:%S,") + f"{now.microsecond // 1000:03d}"
        kind = rng.random()
        starving = (i // 5000) % 40 == 7
        q = [0, 0, 0, 0, 0, 31] if starving else [rng.randint(0, 9) for _ in range(6)]
        if kind < 0.70:
            # A NaN episode: a few consecutive NaN steps every 250 000 lines.
            loss = "nan" if 1000 <= i % 250_000 < 1040 else f"{rng.uniform(0.8, 3.5):.4f}"
            out.append(
                f"{ts} INFO [train] step {step}/2000000 | loss {loss} | acc {rng.uniform(0.2, 0.5):.3f} | "
                f"lr 2.40e-05 | grad_norm {rng.uniform(0.5, 3):.2f} | tok/s {rng.randint(48000, 53000)} | "
                f"q_hs={sum(q)} q_hsb=[{','.join(map(str, q))}]"
            )
            step += 1
        elif kind < 0.80:
            out.append(f"{ts} INFO [hsq] q_hsb=[{','.join(map(str, q))}] at q_hs={sum(q)}")
        elif kind < 0.90:
            # The spec's run: 8 GPUs, 4 metrics each; NVML-off stretches have no gpu/ keys.
            nvml_off = (i // 5000) % 40 == 23
            gpus = (
                ""
                if nvml_off
                else " "
                + " ".join(
                    f"gpu/{g}/util={rng.randint(90, 99)} gpu/{g}/mem_gb={rng.uniform(69, 72):.1f} "
                    f"gpu/{g}/power_w={rng.randint(560, 640)} gpu/{g}/temp_c={rng.randint(60, 72)}"
                    for g in range(GPUS)
                )
            )
            out.append(
                f"{ts} INFO [wandb] snapshot step={step} prof/target_fwd_ms=212.4 prof/drafter_ms=88.1 "
                f"queue/ready_ratio=0.87 queue/full_ratio=0.02 worker/3/seqs=1288 "
                f"cuda/alloc_gb=61.2 cuda/reserved_gb=70.4{gpus}"
            )
        else:
            out.append(f"{ts} " + rng.choice(CHATTER).format(w=rng.randint(0, 7), s=step))
    return out


def simple(rng: random.Random) -> Iterator[str]:
    """The simple file, in blocks of 50 000 lines, each six hours after the last."""
    first, start = 0, datetime(2026, 11, 1, 0, 0, 0)
    while True:
        yield "\n".join(lines(rng, start, 50_000, first)) + "\n"
        first += 50_000
        start += timedelta(hours=6)


class Clock:
    """A log's wall clock in milliseconds, formatted as Python logging writes it."""

    def __init__(self, start: datetime) -> None:
        self.start, self.ms, self._second, self._prefix = start, 0, -1, ""

    def tick(self, rng: random.Random, low_ms: int, high_ms: int) -> str:
        """Move on by a random interval and give the new `YYYY-MM-DD HH:MM:SS,mmm`."""
        self.ms += rng.randint(low_ms, high_ms)
        second, milli = divmod(self.ms, 1000)
        if second != self._second:  # strftime once a second, not once a line
            self._second = second
            self._prefix = (self.start + timedelta(seconds=second)).strftime("%Y-%m-%d %H:%M:%S,")
        return f"{self._prefix}{milli:03d}"


# --- the realistic DFlash run -------------------------------------------------------------------

RUN_LINES = 30_000  # lines between `run start:` headers, about
NONFINITE_LOSS = ["nan"] * 12 + ["NaN", "-nan", "inf"]  # the spellings a diverged run writes
DATA_LINES = [
    "INFO [data] worker {w} prefetched {n} batches (queue {q})",
    "INFO [data] shard {k}/32 opened: /data/dflash/shards/shard-{k:05d}.arrow ({rows:,} rows)",
    "DEBUG [data] collate: {n} seqs, max_len {len}, pad {pad:.1f}%",
    "INFO [data] worker {w} prefetched {n} batches (queue {q})",
    "WARNING [data] worker {w} slow: {slow:.1f}s to fetch batch (threshold 2.0s)",
]


def gpu_pool(rng: random.Random, size: int = 256) -> list[str]:
    """Ready-made `gpu/N/...` groups for 8 GPUs (drawn from a pool: generating 32 numbers per
    snapshot would make the generator the slowest part of the benchmark)."""
    return [
        " "
        + " ".join(
            f"gpu/{g}/util={rng.randint(88, 100)} gpu/{g}/mem_gb={rng.uniform(68, 73):.1f} "
            f"gpu/{g}/power_w={rng.randint(540, 680)} gpu/{g}/temp_c={rng.randint(58, 74)}"
            for g in range(GPUS)
        )
        for _ in range(size)
    ]


def run_header(clock: Clock, rng: random.Random, run: int, nvml: bool) -> list[str]:
    """The lines a run writes at start-up, the NVML warning when it has no telemetry."""
    out = [
        f"{clock.tick(rng, 60_000, 600_000)} INFO [train] run start: run_id=slammed{run} "
        f"pid={41626 + 97 * run} gpus=8 target=Qwen/Qwen3-8B drafter=dflash-b16",
        f"{clock.tick(rng, 1, 5)} INFO [train] HS queue: 90 (min_ready=30)",
    ]
    if not nvml:
        out.append(
            f"{clock.tick(rng, 900, 1500)} WARNING [telemetry] NVML unavailable "
            "(No module named 'pynvml'); GPU telemetry disabled"
        )
    out.append(
        f"{clock.tick(rng, 1, 40)} INFO [data] loaded 1,204,332 samples from /data/dflash/shards (32 shards)"
    )
    return out


class Run:
    """One DFlash run between two `run start:` headers: its length, whether and where it
    diverges, its starvation streaks and whether NVML works."""

    def __init__(self, rng: random.Random, index: int, first_step: int) -> None:
        self.index, self.step, self.good_step = index, first_step, first_step
        self.length = rng.randint(RUN_LINES * 9 // 10, RUN_LINES * 11 // 10)
        self.diverges_at = (
            int(self.length * rng.uniform(0.15, 0.25)) if index % 4 == 1 else self.length
        )
        self.nvml = index % 10 != 6
        streaks = []
        for _ in range(rng.randint(1, 2)):  # 1 500 to 3 750 lines each at 30 000 lines a run
            begin = rng.randint(0, self.length * 17 // 20)
            streaks.append(range(begin, begin + rng.randint(self.length // 20, self.length // 8)))
        self.streaks = streaks

    def starving(self, i: int) -> bool:
        """Whether line `i` of the run falls in a starvation streak."""
        return any(i in streak for streak in self.streaks)


def step_line(rng: random.Random, run: Run, i: int, q: str, q_hs: int) -> str:
    """One `[train] step` line; a non-finite loss once the run has diverged."""
    run.step += 1
    if i >= run.diverges_at:
        loss, acc = rng.choice(NONFINITE_LOSS), "0.000"
        grad = "nan" if rng.random() < 0.7 else "inf"
    else:
        loss, acc = f"{rng.uniform(0.8, 3.5):.4f}", f"{rng.uniform(0.2, 0.5):.3f}"
        grad = f"{rng.uniform(0.5, 3):.2f}"
        run.good_step = run.step
    return (
        f"INFO [train] step {run.step}/200000 | loss {loss} | acc {acc} | lr 2.40e-05 | "
        f"grad_norm {grad} | tok/s {rng.randint(48000, 53000)} | q_hs={q_hs} q_hsb={q}"
    )


def snapshot_line(rng: random.Random, run: Run, gpus: list[str]) -> str:
    """One `[wandb] snapshot` line: 8 GPUs' `gpu/` keys unless the run has no NVML."""
    return (
        f"INFO [wandb] snapshot step={run.step} prof/target_fwd_ms={rng.uniform(190, 240):.1f} "
        f"prof/drafter_ms={rng.uniform(70, 110):.1f} queue/ready_ratio={rng.uniform(0.6, 1):.2f} "
        f"queue/full_ratio={rng.uniform(0, 0.1):.2f} worker/{rng.randint(0, 7)}/seqs={rng.randint(900, 1600)} "
        f"cuda/alloc_gb={rng.uniform(58, 64):.1f} cuda/reserved_gb={rng.uniform(68, 72):.1f}"
        + (rng.choice(gpus) if run.nvml else "")
    )


def data_line(rng: random.Random) -> str:
    """One data-loader line."""
    return rng.choice(DATA_LINES).format(
        w=rng.randint(0, 7),
        n=rng.randint(16, 64),
        q=rng.randint(64, 128),
        k=rng.randint(0, 31),
        rows=rng.randint(30_000, 40_000),
        len=rng.choice((512, 1024, 2048, 4096)),
        pad=rng.uniform(2, 30),
        slow=rng.uniform(2.0, 4.0),
    )


def run_lines(rng: random.Random, clock: Clock, run: Run, gpus: list[str]) -> Iterator[str]:
    """Every line of one run, header first."""
    yield from run_header(clock, rng, run.index, run.nvml)
    for i in range(run.length):
        ts = clock.tick(rng, 20, 400)
        if run.starving(i):
            counts = [0, 0, 0, 0, 0, rng.randint(29, 31)]
        else:
            counts = [rng.randint(0, 9) for _ in range(6)]
        q, q_hs = f"[{','.join(map(str, counts))}]", sum(counts)
        kind = rng.random()
        if kind < 0.55:
            yield f"{ts} {step_line(rng, run, i, q, q_hs)}"
        elif kind < 0.75:
            yield f"{ts} INFO [hsq] q_hsb={q} at q_hs={q_hs}"
        elif kind < 0.87:
            yield f"{ts} {data_line(rng)}"
        elif kind < 0.97:
            yield f"{ts} {snapshot_line(rng, run, gpus)}"
        else:
            yield f"{ts} WARNING [train] grad clipping active: norm {rng.uniform(1.1, 40):.1f} > 1.0"


def realistic(rng: random.Random) -> Iterator[str]:
    """The realistic DFlash file, one run (between restarts) at a time."""
    clock, gpus, step = Clock(datetime(2026, 11, 1)), gpu_pool(rng), 0
    for index in range(1_000_000):
        run = Run(rng, index, step)
        yield "\n".join(run_lines(rng, clock, run, gpus)) + "\n"
        step = run.good_step // 2000 * 2000  # a restart resumes from the last good checkpoint


# --- Hugging Face Trainer ----------------------------------------------------------------------

HF_HEADER = """[INFO|trainer.py:2128] 2024-05-02 10:11:02,114 >> ***** Running training *****
[INFO|trainer.py:2129] 2024-05-02 10:11:02,114 >>   Num examples = 5,200,020
[INFO|trainer.py:2130] 2024-05-02 10:11:02,114 >>   Num Epochs = 3
[INFO|trainer.py:2131] 2024-05-02 10:11:02,114 >>   Instantaneous batch size per device = 4
[INFO|trainer.py:2134] 2024-05-02 10:11:02,114 >>   Total train batch size (w. parallel, distributed & accumulation) = 64
[INFO|trainer.py:2135] 2024-05-02 10:11:02,114 >>   Gradient Accumulation steps = 4
[INFO|trainer.py:2136] 2024-05-02 10:11:02,114 >>   Total optimization steps = {total:,}
[INFO|trainer.py:2137] 2024-05-02 10:11:02,114 >>   Number of trainable parameters = 6,738,415,616
"""
HF_TOTAL = 20_000_000  # optimization steps announced (the file ends long before)
BAR = " ▏▎▍▌▋▊▉"
SECONDS_PER_STEP = 4.11


def hms(seconds: float) -> str:
    """tqdm's elapsed/remaining time: `MM:SS` or `H:MM:SS`."""
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def tqdm(step: int) -> str:
    """One tqdm redraw of the training bar at `step`, `\\r` first."""
    frac = step / HF_TOTAL
    tenths = int(frac * 80)
    bar = ("█" * (tenths // 8) + (BAR[tenths % 8] if tenths % 8 else "")).ljust(10)
    done = step * SECONDS_PER_STEP
    left = (HF_TOTAL - step) * SECONDS_PER_STEP
    return (
        f"\r{int(frac * 100):3d}%|{bar}| {step}/{HF_TOTAL} [{hms(done)}<{hms(left)}, "
        f"{SECONDS_PER_STEP:.2f}s/it]"
    )


def hf_log(rng: random.Random, step: int, nonfinite: bool) -> str:
    """A logging step: ten redraws, the bar cleared, the loss dict."""
    redraws = "".join(tqdm(s) for s in range(step - 9, step + 1))
    if nonfinite:
        loss, grad = rng.choice(("nan", "nan", "nan", "inf")), "nan"
    else:
        loss, grad = f"{rng.uniform(0.4, 2.5):.4f}", f"{rng.uniform(0.2, 4):.4f}"
    lr = 2e-05 * (1 - step / HF_TOTAL)
    return (
        f"{redraws}\r{' ' * 60}\r{{'loss': {loss}, 'grad_norm': {grad}, "
        f"'learning_rate': {lr!r}, 'epoch': {3 * step / HF_TOTAL:.2f}}}"
    )


def hf_extra(rng: random.Random, step: int, nonfinite: bool) -> list[str]:
    """What the Trainer writes between loss dicts now and then: evals, checkpoints, warnings."""
    out = []
    if step % 500 == 0:
        loss = "nan" if nonfinite else f"{rng.uniform(0.5, 2.6):.4f}"
        out.append(
            f"{{'eval_loss': {loss}, 'eval_runtime': {rng.uniform(38, 45):.4f}, "
            f"'eval_samples_per_second': 81.24, 'eval_steps_per_second': 10.17, "
            f"'epoch': {3 * step / HF_TOTAL:.2f}}}"
        )
    if step % 2000 == 0:
        out += [
            f"[INFO|trainer.py:3719] 2024-05-02 10:34:11,520 >> Saving model checkpoint to out/checkpoint-{step}",
            f"[INFO|configuration_utils.py:471] 2024-05-02 10:34:11,523 >> Configuration saved in out/checkpoint-{step}/config.json",
        ]
    if rng.random() < 0.01:
        out += [
            "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:464: UserWarning: "
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly.",
            "  warnings.warn(",
        ]
    return out


def hf(rng: random.Random, target: int) -> Iterator[str]:
    """The HF Trainer log: NaN from 40 % to 55 % of the file and from 80 % to 81 %."""
    yield HF_HEADER.format(total=HF_TOTAL)
    step, written = 0, 0
    while True:
        block = []
        for _ in range(1000):
            step += 10
            at = written / target
            nonfinite = 0.40 <= at < 0.55 or 0.80 <= at < 0.81
            for line in (hf_log(rng, step, nonfinite), *hf_extra(rng, step, nonfinite)):
                block.append(line)
                written += len(line) + 1
        yield "\n".join(block) + "\n"


# --- Megatron-LM -------------------------------------------------------------------------------

MEGATRON_HEADER = """using world size: 64, data-parallel size: 8, context-parallel size: 1, tensor-model-parallel size: 8, pipeline-model-parallel size: 1
> building GPT model ...
 > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 871628800
[after dataloaders are built] datetime: 2024-03-11 09:12:45
done with setup ...
training ...
[before the start of training step] datetime: 2024-03-11 09:12:45
"""
MEGATRON_TOTAL = 20_000_000
GBS = 512


class Megatron:
    """The state a Megatron run's log lines show: iteration, loss scale."""

    def __init__(self) -> None:
        self.iteration, self.scale = 0, 65536.0

    def line(self, rng: random.Random, nonfinite: bool) -> str:
        """One `iteration` line for the last 10 iterations (the log interval)."""
        self.iteration += 10
        it = self.iteration
        head = (
            f" iteration {it:8d}/{MEGATRON_TOTAL:8d} | consumed samples: {it * GBS:12d} | "
            f"elapsed time per iteration (ms): {rng.uniform(3400, 3700):.1f} | "
            f"learning rate: {1.5e-4 * (1 - it / MEGATRON_TOTAL):.3E} | global batch size: {GBS:5d} | "
        )
        if it % 1000 == 0:  # the loss-scale window: the scale grows back after clean iterations
            self.scale = min(self.scale * 2, 65536.0)
        if (
            not nonfinite and rng.random() < 0.01
        ):  # fp16 overflow: every iteration skipped, the scale backs off
            self.scale = max(self.scale / 2, 1.0)
            return f"{head}loss scale: {self.scale:.1f} | number of skipped iterations:  10 | number of nan iterations:   0 |"
        if nonfinite:
            loss, grad, nans = rng.choice(("NAN", "NAN", "INF")), "nan", 10
        else:
            loss, grad, nans = f"{rng.uniform(1.5, 4):.6E}", f"{rng.uniform(0.3, 5):.3f}", 0
        return (
            f"{head}lm loss: {loss} | loss scale: {self.scale:.1f} | grad norm: {grad} | "
            f"number of skipped iterations:   0 | number of nan iterations: {nans:3d} |"
        )

    def extra(self, rng: random.Random) -> list[str]:
        """Timers, validation and checkpoint lines that follow some iteration lines."""
        it, out = self.iteration, []
        if it % 50 == 0:
            out.append(
                f"time (ms) | forward-backward: {rng.uniform(3200, 3400):.2f} | optimizer: "
                f"{rng.uniform(170, 190):.2f} | batch-generator: {rng.uniform(10, 14):.2f} | "
                f"optimizer-unscale-and-check-inf: {rng.uniform(20, 23):.2f}"
            )
        if it % 1000 == 0:
            rule = "-" * 100
            loss = rng.uniform(1.5, 4)
            out += [
                rule,
                f" validation loss at iteration {it} | lm loss value: {loss:.6E} | lm loss PPL: {2.718281828**loss:.6E} | ",
                rule,
            ]
        if it % 5000 == 0:
            out += [
                f"saving checkpoint at iteration {it:7d} to /ckpt/gpt-13b in torch_dist format",
                f"  successfully saved checkpoint from iteration {it:7d} to /ckpt/gpt-13b [ t 1/8, p 1/1 ]",
            ]
        return out


def megatron(rng: random.Random, target: int) -> Iterator[str]:
    """The Megatron log: NAN from 50 % to 65 % of the file and from 85 % to 86 %."""
    yield MEGATRON_HEADER
    run, written = Megatron(), 0
    while True:
        block = []
        for _ in range(2000):
            at = written / target
            nonfinite = 0.50 <= at < 0.65 or 0.85 <= at < 0.86
            for line in (run.line(rng, nonfinite), *run.extra(rng)):
                block.append(line)
                written += len(line) + 1
        yield "\n".join(block) + "\n"


# --- writing -----------------------------------------------------------------------------------


def generator(trainer: str, kind: str) -> Callable[[random.Random, int], Iterator[str]]:
    """The chunk generator for a trainer and kind."""
    if trainer == "dflash":
        return (
            (lambda rng, _: realistic(rng)) if kind == "realistic" else lambda rng, _: simple(rng)
        )
    return {"hf": hf, "megatron": megatron}[trainer]


def write(out: Path, mb: int, trainer: str = "dflash", kind: str = "realistic") -> int:
    """Write at least `mb` MB of the log (whole chunks, cut at a line end) to `out`; its size."""
    rng = random.Random(42)
    target, written = mb * 1_000_000, 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="") as f:
        for chunk in generator(trainer, kind)(rng, target):
            f.write(chunk)
            written += len(chunk.encode())
            if written >= target:
                break
    return written


def main() -> None:
    """Parse the options and write the file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--mb", type=int, help="size (default 730 DFlash, 300 the others)")
    parser.add_argument("--trainer", choices=sorted(DEFAULT_MB), default="dflash")
    parser.add_argument("--kind", choices=["realistic", "simple"], default="realistic")
    args = parser.parse_args()
    if args.kind == "simple" and args.trainer != "dflash":
        parser.error("--kind simple is the earlier DFlash file: use it with --trainer dflash")
    size = write(args.out, args.mb or DEFAULT_MB[args.trainer], args.trainer, args.kind)
    print(f"{args.out}: {size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
