"""Who wrote each line of a multi-rank log and what kind of failure line it is, as polars
expressions over a block: the launchers' line prefixes (`[rankN]:`, `[defaultL]:`, `N: `,
`[1,N]<stderr>:`, pdsh `host: `), the lines that name a rank or host (NCCL `host:pid:tid [L]`
headers and `comm ... rank R nRanks W`, `Setting up process group ... [rank=R]`, a kernel
log's host), and for fleet-relevant lines their class: a primary (the failure itself) or a
symptom (what the other ranks print because of it)."""

from __future__ import annotations

import re

import polars as pl

from logwatch.parse.prefix import PREFIX
from logwatch.parse.prefix import prefixes as prefixes  # re-exported: its home was here

PRIMARY = "primary"
SYMPTOM = "symptom"


# Lines that say who wrote them (kept per source to resolve ranks and hosts): NCCL's INFO lines
# (`host:pid:tid [dev] NCCL INFO comm 0x.. rank R nRanks W ... busId B`), torch's process group
# setup, a kernel log's host.
NCCL_INFO = (
    r"^(?P<nhost>[A-Za-z][\w.-]*):\d+:\d+ \[(?P<ndev>\d+)\] NCCL INFO "
    r"(?:(?:ncclCommInitRank )?comm 0x[0-9a-fA-F]+ rank (?P<crank>\d+) n[Rr]anks (?P<cworld>\d+)"
    r"(?:.*?busId (?P<bus>[0-9a-fA-F]+))?)?"
)
SETUP = r"Setting up process group[^\n]*\[rank=(?P<srank>\d+), world_size=(?P<sworld>\d+)\]"
KERNEL = r"^(?:\S+|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) (?P<khost>[A-Za-z][\w.-]*) kernel:"
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
    (
        "nan-loss",
        PRIMARY,
        r"(?i)\b(?:train[_ ])?loss\b['\"]?\s*[:=]?\s*['\"]?[-+]?(?:nan|inf)\b",
    ),
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
# Literal words one of which every classed line has: a cheap first pass (Aho-Corasick) so the
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
IDENTITY_WORDS = ["NCCL INFO", "Setting up process group", " kernel:"]
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

_NUMBERS = {
    "seq": r"SeqNum=(\d+)|NCCL work: (\d+)|work sequence id: (\d+)|detected by watchdog at work: (\d+)",
    "timeout_ms": r"Timeout\(ms\)=(\d+)",
    "enqueued": r"last enqueued (?:NCCL )?work: (-?\d+)",
    "completed": r"last completed (?:NCCL )?work: (-?\d+)",
    "pg": r"\[PG (?:ID )?(\d+)",
    "peer": r"timeout from\s+rank (\d+)",
}
_OP = r"OpType=(\w+)"
_XID_CODE = r"NVRM: Xid \([^)]*\): (\d+)"
_XID_BUS = r"NVRM: Xid \((?:PCI:)?[0-9A-Fa-f]{4}:([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})"

RECORD_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),
    "line": pl.Int64(),
    "ts": pl.Datetime("us"),
    "timed": pl.Boolean(),
    "p_rank": pl.Int64(),
    "p_local": pl.Int64(),
    "p_host": pl.String(),
    "kind": pl.String(),
    "cls": pl.String(),
    "seq": pl.Int64(),
    "op": pl.String(),
    "pg": pl.Int64(),
    "timeout_ms": pl.Int64(),
    "enqueued": pl.Int64(),
    "completed": pl.Int64(),
    "peer": pl.Int64(),
    "xid": pl.Int64(),
    "bus": pl.String(),
    "text": pl.String(),
}
"""One fleet-relevant line: where, when (`timed`: its own time, else the source's last), who
by its prefixes, its class and kind, and the collective it names."""

FACT_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),
    "p_rank": pl.Int64(),
    "p_local": pl.Int64(),
    "p_host": pl.String(),
    "nhost": pl.String(),
    "ndev": pl.Int64(),
    "crank": pl.Int64(),
    "cworld": pl.Int64(),
    "srank": pl.Int64(),
    "sworld": pl.Int64(),
    "khost": pl.String(),
    "bus": pl.String(),
}
"""One line that names its writer (rank, host, GPU, world size)."""


def maybe_classed(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of a block that may be fleet-relevant (one literal pass; `classed` decides,
    once for every source, as its regexes cost more per call than per line)."""
    return frame.filter(pl.col("text").str.contains_any(CLASS_WORDS)).select(CANDIDATE_COLUMNS)


CANDIDATE_COLUMNS = ["source", "line", "ts", "timed", "p_rank", "p_local", "p_host", "text"]


def classed(frame: pl.DataFrame) -> pl.DataFrame:
    """The fleet-relevant rows (`CANDIDATE_COLUMNS`) as `RECORD_SCHEMA` rows."""
    rows = frame.filter(pl.col("text").str.contains(CLASS_GATE))
    if rows.is_empty():
        return pl.DataFrame(schema=RECORD_SCHEMA)
    text = pl.col("text")
    kind: pl.Expr = pl.lit(None, dtype=pl.String)
    cls: pl.Expr = pl.lit(None, dtype=pl.String)
    for name, klass, pattern in reversed(CLASSES):
        hit = text.str.contains(pattern)
        kind = pl.when(hit).then(pl.lit(name)).otherwise(kind)
        cls = pl.when(hit).then(pl.lit(klass)).otherwise(cls)
    numbers = [_first_number(text, pattern).alias(name) for name, pattern in _NUMBERS.items()]
    bus = text.str.extract_groups(_XID_BUS)
    out = rows.with_columns(
        kind.alias("kind"),
        cls.alias("cls"),
        text.str.extract(_OP, 1).alias("op"),
        text.str.extract(_XID_CODE, 1).cast(pl.Int64, strict=False).alias("xid"),
        pl.concat_str(bus.struct.field("1"), bus.struct.field("2")).str.to_lowercase().alias("bus"),
        *numbers,
    ).filter(pl.col("kind").is_not_null())
    return out.select([pl.col(name).cast(dtype) for name, dtype in RECORD_SCHEMA.items()])


def _first_number(text: pl.Expr, pattern: str) -> pl.Expr:
    """The first capture group of any alternative of `pattern` that matched, as an integer."""
    groups = text.str.extract_groups(pattern)
    count = re.compile(pattern).groups
    fields = [groups.struct.field(str(i)) for i in range(1, count + 1)]
    return pl.coalesce(*fields).cast(pl.Int64, strict=False)


def facts(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of a block that name their writer, as `FACT_SCHEMA` rows."""
    rows = frame.filter(pl.col("text").str.contains_any(IDENTITY_WORDS))
    if rows.is_empty():
        return pl.DataFrame(schema=FACT_SCHEMA)
    # The identity patterns read the line after its launcher prefixes.
    rows = rows.with_columns(pl.col("text").str.replace(PREFIX, "").alias("_body"))
    body = pl.col("_body")
    parts = []
    for word, pattern in (("NCCL INFO", NCCL_INFO), ("Setting up", SETUP), (" kernel:", KERNEL)):
        some = rows.filter(body.str.contains(word, literal=True))
        if some.height:
            found = some.with_columns(body.str.extract_groups(pattern).alias("_found"))
            parts.append(found.unnest("_found"))
    out = pl.concat(parts, how="diagonal_relaxed") if parts else rows.clear()
    for name, dtype in FACT_SCHEMA.items():
        if name not in out.columns:
            out = out.with_columns(pl.lit(None, dtype=dtype).alias(name))
    out = out.with_columns(pl.col("bus").str.to_lowercase())
    known = pl.any_horizontal(
        pl.col(name).is_not_null() for name in ("nhost", "crank", "srank", "khost")
    )
    return out.filter(known).select(
        [pl.col(name).cast(dtype, strict=False) for name, dtype in FACT_SCHEMA.items()]
    )
