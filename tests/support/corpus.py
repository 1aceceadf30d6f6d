"""A seeded randomized log corpus for the byte-identical replay tests (tests/test_identical.py).

`corpus(seed, lines)` mixes, in random order: real lines from tests/data/dialects.toml,
failures.toml and stateful.toml; runs of lines cut from the sample logs; DFlash step, snapshot
(8 GPUs, some keys or whole GPUs missing, NVML-off stretches, idle and hot episodes) and `[hsq]`
lines with random values; every NaN / Inf spelling logwatch/parse/ knows; `\\r` redraws, CRLF,
ANSI colours, rank prefixes, yearless timestamps, rsyslog `#015` escapes, binary garbage, run
restarts and stalls. Same seed, same inputs: same bytes. The corpora the goldens were made from
are stored beside them (tests/data/golden/corpus/), so an edit to the inputs never moves a golden.
"""

from __future__ import annotations

import random
import tomllib
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"

# Every non-finite spelling the parser reads as a number (NUMBER, PADDING in parse/dialects/generic.py).
NONFINITE = [
    "nan", "NaN", "NAN", "-nan", "+nan", "inf", "-inf", "+inf", "Inf", "-Inf", "INF",
    "Infinity", "-Infinity", "infinity", "nan.0", "inf.0", "-inf.", "NaN.000",
]  # fmt: skip
# A value as trainers print it around a spelling: bare, a tensor repr, quoted.
WRAPS = ["{v}", "tensor({v}, device='cuda:0')", "tensor({v})", "'{v}'"]
# Lines that carry a non-finite value in other ways (words, positional dialects, sub-losses).
NAN_LINES = [
    "Loss became infinite or NaN at iteration={step}!",
    "[NaN/Inf detected] Loss at step {step}, skipping batch",
    "RuntimeError: Function 'MulBackward0' returned nan values in its 0th output.",
    "RuntimeError: Function 'LogSoftmaxBackward0' returned {v} values in its 1st output.",
    "Unexpected result {v} (message='found NaN in local forward loss calculation') found {v} in local forward loss calculation",
    "Unexpected result {v} (message='found NaN in local grad norm') found {v} in local grad norm",
    " [2024-01-01 00:00:00] iteration {step}/ 1000 | lm loss: {v} | grad norm: 1.2 | number of nan iterations: {n} |",
    " {step}: {v}, {v} avg loss, 0.000100 rate, 3.2 seconds, 64 images",
    " {step}: 1.5, {v} avg, 0.001 rate, 2.1 seconds",
    "[2024-05-01 10:00:00,000 INFO] Step {step}/50000; acc: 12.1; ppl: 300.2; xent: {v}; lr: 0.00100",
    "epoch 001:  {step} / 1000 loss={v}, nll_loss=2.1, ppl=4.3, wps=1234, ups=1.2, num_updates={step}",
    "{{'loss': {v}, 'grad_norm': {v}, 'learning_rate': 1e-05, 'epoch': 0.5}}",
    "Epoch 3:  45%|####5     | {step}/1000 [01:00<01:10, 7.11it/s, loss={v}, v_num=0, train_loss_step={v}]",
    "step: {step}  loss: {v}  memory: 40.1GiB(41.0%)  tps: 1,321  mfu: 40.1%",
    "iter {step}: loss {v}, time 120.3ms, mfu 30.1%",
    "step {step} image_loss 5.0 / model_loss {v} / kl 0.1",
    "| model_loss/Average    {v} |",
    "-----loss-----:  tensor({v}, device='cuda:0')",
    "**loss**: {v}**",
    "Loss is {v}, stopping training",
    "[Loss] {v} [Step] {step}",
    "avr_loss={v} lr=1e-4 step={step}",
    "val loss {v}, loss 2.5 step {step}",
    "best loss {v} at step {step}",
    "eval_loss: {v} step: {step}",
    "loss_scale: {v} step {step}",
    "checkpoint saved to ckpt/epoch=3-step={step}-loss=nan-epoch=3.ckpt",
    "Validation loss at iteration {step} | lm loss value: {v}",
    "reduced_train_loss={v} global_step={step}.0 loss={v}",
    "| epoch 001 | valid on 'valid' subset | loss {v} | nll_loss 2.1 | num_updates {step}",
]
YEARLESS = [
    "E{md} {hms}.118000 60877 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={step}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.",
    "I{md} {hms}.001 1234 trainer.cc:42] step {step} loss {v}",
    "{mon} {day:2d} {hms} node01 kernel: NVRM: Xid (PCI:0000:44:00): 79, pid=60880, name=python, GPU has fallen off the bus.",
    "{mon} {day:2d} {hms} node01 kernel: Out of memory: Killed process 4242 (python)",
    "[{mm}/{dd} {hms} d2.utils.events]:  eta: 1:00:00  iter: {step}  total_loss: {v}  lr: 0.01",
    "[{mm}/{dd} {hms} d2.engine.train_loop]: Loss became infinite or NaN at iteration={step}!",
    "[Mon {mon} {day:2d} {hms} 2026] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=python, An uncorrectable double bit error",
]
PREFIXES = ["[rank{r}]:", "[default{r}]:", "[1,mpirank:{r},algo-1]<stdout>:", "{r}: ", "  {r}: "]
CHATTER = [
    "INFO [data] worker {w} prefetched 64 batches (queue 128)",
    "WARNING [data] worker {w} slow: 2.{w}s to fetch batch (threshold 2.0s)",
    "INFO [ckpt] saved checkpoint to /workspace/ckpt/step_{step} (3.1 GB) in 12.4s",
    "WARNING [telemetry] NVML unavailable (No module named 'pynvml'); GPU telemetry disabled",
    "WARNING [amp] Attempted loss scale: 1024, reducing to 512",
    "INFO [train] HS queue: 90 (min_ready=30)",
    "WARNING [train] non-finite loss, skipping optimizer step",
]
GPUS = 8


def _toml_lines(name: str, table: str, key: str) -> list[str]:
    with (DATA / name).open("rb") as f:
        return [str(entry[key]) for entry in tomllib.load(f)[table]]


def _sources() -> tuple[list[str], list[list[str]], list[list[str]]]:
    """Single lines (dialects, failures), excerpts (stateful cases) and the sample logs."""
    single = _toml_lines("dialects.toml", "line", "text") + _toml_lines(
        "failures.toml", "line", "text"
    )
    excerpts = [t.strip("\n").split("\n") for t in _toml_lines("stateful.toml", "case", "input")]
    samples = [
        p.read_text(encoding="utf-8").splitlines()
        for p in sorted((ROOT / "samples").rglob("*.log"))
    ]
    return single, excerpts, samples


class _Run:
    """The state of a generated run: its clock, step, GPU episodes and restarts."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.now = datetime(2026, 11, 28, 9, 0, 0) + timedelta(seconds=rng.randint(0, 86_400))
        self.step = rng.randint(1, 5000)
        self.runs = 0
        self.idle_gpu: int | None = None  # a GPU at 0% for a while (gpu-idle)
        self.hot_gpu: int | None = None  # a GPU at 90 C for a while (gpu-hot)
        self.nvml_off = 0  # snapshots left without gpu/ keys (gpu-metrics-missing)
        self.starving = 0  # [hsq] reports left with one bucket (bucket-starvation)
        self.slow = 0  # steps left at a tenth of the throughput (throughput-drop)

    def tick(self) -> str:
        self.now += timedelta(milliseconds=self.rng.randint(20, 4000))
        return self.now.strftime("%Y-%m-%d %H:%M:%S,") + f"{self.now.microsecond // 1000:03d}"

    def value(self, finite: str) -> str:
        if self.rng.random() < 0.04:
            return self.rng.choice(WRAPS).format(v=self.rng.choice(NONFINITE))
        return finite


def _buckets(run: _Run) -> list[int]:
    if run.starving:
        run.starving -= 1
        return [0, 0, 0, 0, 0, run.rng.randint(20, 40)]
    return [run.rng.randint(0, 9) for _ in range(6)]


def _step_line(run: _Run) -> str:
    rng = run.rng
    run.step += 1
    q = _buckets(run)
    loss = run.value(f"{rng.uniform(0.8, 3.5):.4f}" if rng.random() > 0.01 else "45.2000")
    grad = run.value(f"{rng.uniform(0.5, 3):.2f}")
    tok = rng.randint(48000, 53000) // (10 if run.slow else 1)
    run.slow = max(run.slow - 1, 0)
    return (
        f"{run.tick()} INFO [train] step {run.step}/200000 | loss {loss} | acc {rng.uniform(0.2, 0.5):.3f}"
        f" | lr 2.40e-05 | grad_norm {grad} | tok/s {tok} | q_hs={sum(q)} q_hsb=[{','.join(map(str, q))}]"
    )


def _gpu_keys(run: _Run, gpu: int) -> list[str]:
    rng = run.rng
    util = 0 if gpu == run.idle_gpu else rng.randint(85, 99)
    temp = 90 if gpu == run.hot_gpu else rng.randint(55, 75)
    mem = 139.5 if rng.random() < 0.01 else round(rng.uniform(60, 72), 1)
    keys = [
        f"gpu/{gpu}/util={util}",
        f"gpu/{gpu}/mem_gb={mem}",
        f"gpu/{gpu}/mem_total_gb=139.8",
        f"gpu/{gpu}/power_w={rng.randint(500, 650)}",
        f"gpu/{gpu}/temp_c={temp}",
    ]
    return [k for k in keys if rng.random() > 0.05]  # a key missing now and then


def _snapshot_line(run: _Run) -> str:
    rng = run.rng
    if run.nvml_off:
        run.nvml_off -= 1
        gpus: list[str] = []
    else:
        gpus = [k for g in range(GPUS) if rng.random() > 0.03 for k in _gpu_keys(run, g)]
    head = (
        f"{run.tick()} INFO [wandb] snapshot step={run.step} prof/target_fwd_ms={rng.uniform(200, 230):.1f}"
        f" queue/ready_ratio={rng.uniform(0, 1):.2f} cuda/alloc_gb={run.value('61.2')}"
    )
    return " ".join([head, *gpus])


def _hsq_line(run: _Run) -> str:
    q = _buckets(run)
    return f"{run.tick()} INFO [hsq] q_hsb=[{','.join(map(str, q))}] at q_hs={sum(q)}"


def _episode(run: _Run) -> list[str]:
    """Start a stateful episode (a quiet one line), so streak / hold rules fire and resolve."""
    rng = run.rng
    kind = rng.randrange(5)
    if kind == 0:
        run.idle_gpu = None if run.idle_gpu is not None else rng.randrange(GPUS)
    elif kind == 1:
        run.hot_gpu = None if run.hot_gpu is not None else rng.randrange(GPUS)
    elif kind == 2:
        run.nvml_off = rng.randint(2, 6)
    elif kind == 3:
        run.starving = rng.randint(3, 9)
    else:
        run.slow = rng.randint(5, 40)
    return []


def _restart(run: _Run) -> list[str]:
    run.runs += 1
    pid = run.rng.randint(1000, 99999)
    return [
        f"{run.tick()} INFO [train] run start: run_id=gold{run.runs} pid={pid} gpus=8 target=Qwen/Qwen3-8B drafter=dflash-b16"
    ]


def _stall(run: _Run) -> list[str]:
    run.now += timedelta(minutes=run.rng.choice([3, 11, 40]))
    return [f"{run.tick()} INFO [train] resumed after a pause"]


def _nan_line(run: _Run) -> list[str]:
    rng = run.rng
    v = rng.choice(WRAPS).format(v=rng.choice(NONFINITE))
    text = rng.choice(NAN_LINES).format(v=v, step=run.step, n=rng.choice([0, 1, 3]))
    return [text if rng.random() < 0.5 else f"{run.tick()} {text}"]


def _yearless(run: _Run) -> list[str]:
    n = run.now
    return [
        run.rng.choice(YEARLESS).format(
            md=n.strftime("%m%d"),
            hms=n.strftime("%H:%M:%S"),
            mon=n.strftime("%b"),
            day=n.day,
            mm=n.strftime("%m"),
            dd=n.strftime("%d"),
            step=run.step,
            v=run.value("1.25"),
        )
    ]


def _redraw(run: _Run) -> list[str]:
    """A tqdm bar redrawn with `\\r`; sometimes a NaN drawn over by a later state."""
    rng = run.rng
    parts = []
    for i in range(rng.randint(2, 5)):
        loss = rng.choice(NONFINITE) if rng.random() < 0.3 else f"{rng.uniform(1, 3):.3f}"
        parts.append(
            f" {i * 10}%|##   | {run.step + i}/1000 [00:{i:02d}<01:00, 3.0{i}it/s, loss={loss}]"
        )
    return ["\r".join(parts) + ("\r" if rng.random() < 0.3 else "")]


def _decorated(line: str, rng: random.Random) -> str:
    """A line with ANSI colours or a rank prefix, as torchrun / srun / rich print it."""
    kind = rng.random()
    if kind < 0.3:
        return rng.choice(PREFIXES).format(r=rng.randrange(8)) + line
    if kind < 0.5:
        return line.replace(" loss ", " \x1b[32mloss \x1b[33m", 1).replace(" | ", "\x1b[0m | ", 1)
    if kind < 0.55:
        return line.replace("\r", "#015") + "#033[0m"
    return line


def _garbage(rng: random.Random) -> bytes:
    """Binary noise: NULs, invalid UTF-8, stray escapes, a lone CR; never a newline."""
    pool = [
        b"\x00",
        b"\xff\xfe",
        b"\xc3(",
        b"\x1b[",
        b"\r",
        b"\xe2\x82",
        b"\x80",
        b"loss",
        b" nan ",
    ]
    noise = b"".join(rng.choice(pool) for _ in range(rng.randint(1, 12)))
    return noise + bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))).replace(b"\n", b"")


def corpus(seed: int, lines: int = 3000) -> bytes:
    """`lines` or a few more log lines, as bytes, mixed at random from every shape above."""
    rng = random.Random(seed)
    single, excerpts, samples = _sources()
    run = _Run(rng)
    out = [line.encode("utf-8") + b"\n" for line in _restart(run)]  # a dated first line

    def sample_run() -> list[str]:
        log = rng.choice(samples)
        start = rng.randrange(len(log))
        return log[start : start + rng.randint(3, 40)]

    makers: list[tuple[float, Callable[[], list[str]]]] = [
        (0.50, lambda: [_step_line(run)]),
        (0.10, lambda: [_snapshot_line(run)]),
        (0.08, lambda: [_hsq_line(run)]),
        (0.06, lambda: [rng.choice(single)]),
        (0.05, lambda: [f"{run.tick()} " + rng.choice(CHATTER).format(w=rng.randrange(8), step=run.step)]),
        (0.05, lambda: _nan_line(run)),
        (0.03, lambda: _yearless(run)),
        (0.03, lambda: _redraw(run)),
        (0.02, lambda: _episode(run)),
        (0.01, sample_run),
        (0.005, lambda: rng.choice(excerpts)),
        (0.003, lambda: _restart(run)),
        (0.003, lambda: _stall(run)),
    ]  # fmt: skip
    weights = [w for w, _ in makers]
    crlf = False
    while len(out) < lines:
        (make,) = rng.choices([m for _, m in makers], weights)
        text = make()
        if rng.random() < 0.01:
            crlf = not crlf  # CRLF stretches, as from a Windows host
        for line in text:
            body = _decorated(line, rng).encode("utf-8")
            if rng.random() < 0.003:
                body = _garbage(rng) + (body if rng.random() < 0.5 else b"")
            out.append(body + (b"\r\n" if crlf else b"\n"))
    tail = b"" if rng.random() < 0.5 else out.pop().rstrip(b"\r\n")  # maybe no final newline
    return b"".join(out) + tail
