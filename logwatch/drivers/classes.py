"""What kind of failure a log line is, for the fleet post-mortem: each class's pattern (a
primary: the failure itself; a symptom: what the other ranks print because of it), and the
literal words a block's cheap first passes look for before any of the patterns runs
(`logwatch.drivers.lineinfo`)."""

from __future__ import annotations

import re

from logwatch.drivers.noderank import NODE_WORDS

PRIMARY = "primary"
SYMPTOM = "symptom"

# What follows a loss key that says NaN or Inf. `\b(?:train[_ ])?loss` is written as two
# alternatives that each begin with a literal ("train loss" has a word boundary before "loss"):
# with the optional prefix the regex engine's prefilter was lost, and every Megatron line (`lm
# loss: ...`, `check-inf`) cost a full match attempt (100 MB: 0.24 s, now 0.06 s).
_NONFINITE_AFTER = r"\b['\"]?\s*[:=]?\s*['\"]?[-+]?(?:nan|inf)\b"
# (kind, class, pattern): the first that matches a line classes it. Hardware and CUDA errors
# come before the watchdog symptoms (`watchdog thread terminated with exception: CUDA error`
# is the culprit's own error); a Python exception not raised by c10d comes last.
CLASSES: tuple[tuple[str, str, str], ...] = (
    ("gpu-lost", PRIMARY, r"Xid \([^)]*\): 79\b|fallen off the bus|GPU is lost|GpuIsLost"),
    ("xid", PRIMARY, r"NVRM: Xid \("),
    (
        "cuda-oom",
        PRIMARY,
        r"CUDA out of memory|OutOfMemoryError: CUDA|CUDA error: out of memory|"
        r"CUDA_ERROR_OUT_OF_MEMORY",
    ),
    (
        "cuda-error",
        PRIMARY,
        r"CUDA error: |an illegal memory access was encountered|uncorrectable ECC error|"
        r"unspecified launch failure|device-side assert|CUDA_ERROR_ECC_UNCORRECTABLE",
    ),
    (
        "host-oom",
        PRIMARY,
        r"Out of memory: Kill(?:ed)? process|invoked oom-killer|Memory cgroup out of memory|"
        r"oom[-_]kill event|\bOOMKilled\b",
    ),
    ("segfault", PRIMARY, r"Segmentation fault|\bSIGSEGV\b|\bSIGBUS\b|Bus error \(core dumped\)"),
    ("nan-loss", PRIMARY, r"(?i)\bloss" + _NONFINITE_AFTER + r"|\btrain_loss" + _NONFINITE_AFTER),
    ("nan-grad", PRIMARY, r"(?i)\bgrad[_ ]?norm\b['\"]?\s*[:=]?\s*['\"]?[-+]?(?:nan|inf)\b"),
    (
        "nccl-timeout",
        SYMPTOM,
        r"Watchdog caught collective operation timeout|Timeout at NCCL work|"
        r"detected by watchdog at work|Some NCCL operations have failed or timed out|"
        r"taking the entire process down|Received a dump signal|"
        r"Observed flight recorder dump signal|First PG on this rank to signal dumping|"
        r"preparing to dump debug info|Terminating the process after attempting to dump|"
        r"watchdog got stuck|flight recorder dumps to finish|collective operation timeout",
    ),
    (
        "nccl-error",
        SYMPTOM,
        r"ncclRemoteError|remote process exited|Connection closed by remote peer|"
        r"NCCL communicator was aborted|NCCL WARN|NCCL error",
    ),
    ("dist-error", SYMPTOM, r"DistNetworkError|DistBackendError|DistStoreError"),
    (
        "stopped",
        SYMPTOM,
        r"closing signal SIG[A-Z]+|Received Signals?\.SIG|SignalException|got signal: \d+|"
        r"Signal \d+ \(SIG[A-Z]+\) received by PID|sigkill_handler|"
        r"srun: error: [^\n]*task[s]? [\d-]+: (?:Exited|Killed|Terminated)|CANCELLED AT|"
        r"\*\*\* STEP [^\n]* CANCELLED",
    ),
    ("child-failed", SYMPTOM, r"ChildFailedError"),
    (
        "run-crashed",
        PRIMARY,
        r"^(?:[^\n]{0,48}\]: ?|\d+: )?(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception)(?:: |$)",
    ),
)
CLASS_GATE = "|".join(f"(?:{pattern})" for _, _, pattern in CLASSES)
# Literal words one of which every classed line has: a cheap first pass (`any_word`) so the
# regexes run only on the few lines that may match.
CLASS_WORDS = [
    *("Xid", "fallen off", "GPU is lost", "GpuIsLost", "CUDA", "ECC", "launch failure"),
    *("device-side", "oom", "OOM", "Out of memory", "out of memory", "Segmentation", "SIG"),
    # not "INF" nor "inf" alone: every INFO and info line has them
    *("Bus error", "nan", "NaN", "NAN", " inf", "=inf", ":inf", "'inf", "-inf", "Inf"),
    *(" INF ", "=INF", ":INF", "'INF", "atchdog", "Timeout", "timed out"),
    *("timeout", "taking the entire", "dump", "NCCL", "nccl", "Dist", "signal", "Signal"),
    *("sigkill", "srun:", "CANCELLED", "ChildFailed", "Error", "Exception"),
]
NONFINITE_KINDS = ("nan-loss", "nan-grad")
NONFINITE_CLASSES = "|".join(f"(?:{p})" for kind, _, p in CLASSES if kind in NONFINITE_KINDS)
# The words only the NaN and Inf classes need.
_NONFINITE_WORDS = frozenset(
    [
        *("nan", "NaN", "NAN", " inf", "=inf", ":inf", "'inf", "-inf", "Inf"),
        *(" INF ", "=INF", ":INF", "'INF"),
    ]
)
# Every other class's match holds one of these: its words, and the three phrases whose only
# class word could be a NaN word (`tests/drivers/test_tapped.py` generates lines of each class).
OTHER_WORDS = [word for word in CLASS_WORDS if word not in _NONFINITE_WORDS] + [
    "an illegal memory access was encountered",
    "remote process exited",
    "Connection closed by remote peer",
]
IDENTITY_WORDS = ["NCCL INFO", "Setting up process group", " kernel:", *NODE_WORDS]


def any_word(words: list[str]) -> str:
    """A regex matching where a line has any of `words` (what `str.contains_any(words)` tells):
    as one alternation of literals the regex engine's prefilter (Teddy) finds them in a third
    of Aho-Corasick's time, and in a tenth where none is there (DFlash, 100 MB: 0.06 s
    against 0.18 s; the identity words 0.02 s against 0.18 s)."""
    return "|".join(re.escape(word) for word in words)


CLASS_ANY = any_word(CLASS_WORDS)
IDENTITY_ANY = any_word(IDENTITY_WORDS)
WORD_ANY = any_word([*CLASS_WORDS, *IDENTITY_WORDS])  # a line with either: the tap's first pass
OTHER_ANY = any_word(OTHER_WORDS)
CAUSE_TEXT = {
    "gpu-lost": "GPU fell off the bus (Xid 79)",
    "xid": "Xid error",
    "cuda-oom": "CUDA out of memory",
    "cuda-error": "CUDA error",
    "host-oom": "host out of memory",
    "segfault": "segmentation fault",
    "nan-loss": "non-finite loss",
    "nan-grad": "non-finite grad norm",
    "run-crashed": "Python exception",
    "none": "printed nothing",
}
