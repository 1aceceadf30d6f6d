"""`logwatch replay` of a fleet: a folder or a quoted glob in, the verdict first, each cascade
one line, a row per host, rank and host on every event, the `fleet` object in JSON."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.drivers.lineinfo import PRIMARY, SYMPTOM, classed, prefixes
from tests.support.paths import load_bench

ROOT = Path(__file__).resolve().parents[2]


gen = load_bench("gen_fleet")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> object:
    """16 ranks on 2 hosts, torchrun layout, the culprit's GPU lost (Xid 79), it hangs."""
    root = tmp_path_factory.mktemp("fleet") / "run"
    return gen.generate(root, gen.FleetSpec(ranks=16, steps=4, cause="xid79", mode="hangs"))


def test_a_folder_replays_verdict_first_cascade_folded_a_row_per_host(fleet) -> None:  # type: ignore[no-untyped-def]
    """The first stdout line is the root-cause naming the culprit; the 15 ranks' timeouts are
    one timeline entry; the summary is a row per host, not one per file."""
    code, out, err = run("replay", str(fleet.root))
    assert code == 0, err
    lines = out.splitlines()
    rank, host = fleet.culprit_rank, fleet.culprit_host
    assert " root-cause " in lines[0]
    assert f"rank {rank} ({host}): GPU fell off the bus (Xid 79) at " in lines[0]
    assert "; 15 of 16 ranks then timed out in ALLREDUCE SeqNum 88811 (600 s)" in lines[0]
    assert f"{host}/kern.log:" in lines[0]  # the deciding line: the host's kernel log
    cascade = [line for line in lines if "nccl-timeout on" in line]
    assert len(cascade) == 1
    assert " nccl-timeout on 15/16 ranks, 02:" in cascade[0]
    assert ", SeqNum 88811 (ALLREDUCE, 600 s) (15 alerts, per rank in --format jsonl)" in cascade[0]
    assert not any("== " in line for line in lines)  # no per-file summary
    assert "16 ranks on 2 hosts, 34 files" in lines
    rows = [line for line in lines if line.startswith("node-")]
    assert [row.split()[:3] for row in rows] == [["node-000", "8", "17"], ["node-001", "8", "17"]]
    assert rows[rank // 8].endswith("<- root cause")


def test_a_quoted_glob_with_double_star_reads_the_same_files(fleet) -> None:  # type: ignore[no-untyped-def]
    """`'DIR/**/*.log'` expands recursively: the same verdict as the folder."""
    _, by_folder, _ = run("replay", str(fleet.root))
    code, by_glob, err = run("replay", f"{fleet.root}/**/*.log")
    assert code == 0, err
    assert by_glob.splitlines()[0] == by_folder.splitlines()[0]


def test_files_not_text_are_skipped_and_counted_on_one_line(tmp_path: Path) -> None:
    """A core dump and a binary beside the logs are not parsed: one stderr line counts them."""
    run_dir = gen.generate(tmp_path / "run", gen.FleetSpec(ranks=16, steps=4)).root
    (run_dir / "core.1234").write_bytes(bytes(range(256)) * 64)
    (run_dir / "node-000" / "model.pt").write_bytes(b"\x80\x02PK\x00\x00" * 500)
    code, out, err = run("replay", str(run_dir))
    assert code == 0
    assert err.count("\n") == 1
    assert err.startswith("logwatch: 2 files skipped as not text (")
    assert "34 files" in out


def test_jsonl_verdict_first_every_event_with_rank_and_host(fleet) -> None:  # type: ignore[no-untyped-def]
    """JSONL: the root-cause first, with its labels; each rank's timeout carries its global
    rank and host as strings; an untimed line's event says which line gave its time."""
    code, out, _ = run("replay", str(fleet.root), "--format", "jsonl")
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    first = events[0]
    assert first["rule"] == "root-cause"
    assert (first["severity"], first["status"]) == ("critical", "firing")
    assert first["labels"] == {
        "rank": str(fleet.culprit_rank),
        "host": fleet.culprit_host,
        "cause": "gpu-lost",
        "basis": "first-error",
        "victims": "15",
    }
    assert sum(e["rule"] == "root-cause" for e in events) == 1
    timeouts = [e for e in events if e["rule"] == "nccl-timeout"]
    assert len(timeouts) == 15
    assert {e["labels"]["rank"] for e in timeouts} == {
        str(r) for r in range(16) if r != fleet.culprit_rank
    }
    for event in timeouts:
        assert event["labels"]["host"] == f"node-{int(event['labels']['rank']) // 8:03d}"
        assert event["labels"]["local_rank"] == str(int(event["labels"]["rank"]) % 8)


def test_an_untimed_line_takes_the_time_of_the_last_timed_line(tmp_path: Path) -> None:
    """A traceback's exception line (no time) gets the time of the line before it, marked."""
    log = tmp_path / "rank0.log"
    log.write_text(
        "2026-12-07 02:00:01,000 INFO step 1 loss 2.5\n"
        "2026-12-07 02:00:03,500 INFO step 2 loss 2.4\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 9, in <module>\n'
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    code, out, _ = run("replay", str(log), "--format", "jsonl")
    assert code == 0
    event = next(json.loads(line) for line in out.splitlines() if '"cuda-error"' in line)
    assert event["ts"] == "2026-12-07T02:00:03.500000"
    assert event["labels"]["ts_from_line"] == "2"


def test_json_has_the_fleet_object(fleet) -> None:  # type: ignore[no-untyped-def]
    """`--format json`: ranks, hosts, the ranks with no failure, per-class counts, the cascade
    and the verdict."""
    code, out, _ = run("replay", str(fleet.root), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["events"][0]["rule"] == "root-cause"
    f = doc["fleet"]
    assert (f["ranks"], f["world"], f["hosts"]) == (16, 16, ["node-000", "node-001"])
    assert f["ranks_without_failure"] == []
    assert f["cascades"][0]["ranks"] == 15 and f["cascades"][0]["seq"] == 88811
    kinds = {(c["class"], c["kind"]): c["ranks"] for c in f["classes"]}
    assert kinds[("symptom", "nccl-timeout")] == 15
    assert kinds[("primary", "gpu-lost")] == 1
    assert f["verdicts"][0]["labels"]["rank"] == str(fleet.culprit_rank)


def test_layout_pattern_names_host_and_local_rank(tmp_path: Path) -> None:
    """`--layout '{host}/r{local_rank}.txt'`: files no built-in layout knows get host and
    local rank; a local rank alone is never called `rank`."""
    for host in ("gpu-a1", "gpu-b2"):
        (tmp_path / host).mkdir()
        for local in range(2):
            (tmp_path / host / f"r{local}.txt").write_text(
                "2026-12-07 02:00:01,000 INFO step 1 loss nan\n"
            )
    code, out, _ = run(
        "replay", str(tmp_path), "--layout", "{host}/r{local_rank}.txt", "--format", "jsonl"
    )
    assert code == 0
    labels = [json.loads(line)["labels"] for line in out.splitlines()]
    assert sorted((lab["host"], lab["local_rank"]) for lab in labels) == [
        ("gpu-a1", "0"),
        ("gpu-a1", "1"),
        ("gpu-b2", "0"),
        ("gpu-b2", "1"),
    ]
    assert not any("rank" in lab for lab in labels)


def test_bad_layout_is_one_line(tmp_path: Path) -> None:
    """An unknown `--layout` field: exit 2, one line naming it and the fields there are."""
    (tmp_path / "a.log").write_text("x\n")
    code, _, err = run("replay", str(tmp_path / "a.log"), "--layout", "{hostname}/{*}.log")
    assert code == 2
    assert err.count("\n") == 1 and "unknown field {hostname}" in err


def test_a_pasted_srun_log_gets_its_verdict() -> None:
    """One file of many ranks (`srun -l` prefixes): rank 63's NaN is the verdict, before the
    two ranks' timeouts."""
    code, out, _ = run("replay", str(ROOT / "samples" / "trainers" / "megatron.log"))
    assert code == 0
    assert "root-cause" in out.splitlines()[0]
    assert "rank 63: non-finite loss at 09:12:45" in out.splitlines()[0]


# The public line forms (tests/data: /work/shared/research/fleet.md §4, with their threads).
PUBLIC_LINES = [
    (  # NVIDIA/nccl#1504
        "[rank1]:[E1103 07:34:57.460801783 ProcessGroupNCCL.cpp:1834] [PG ID 0 PG GUID "
        "0(default_pg) Rank 1] Timeout at NCCL work: 1, last enqueued NCCL work: 1, last "
        "completed NCCL work: -1.",
        SYMPTOM,
        "nccl-timeout",
        1,
    ),
    (  # snowflakedb/ArcticTraining#219
        "[rank5]:[E626 16:48:25.440238649 ProcessGroupNCCL.cpp:2268] [PG ID 0 PG GUID "
        "0(default_pg) Rank 5]  failure detected by watchdog at work sequence id: 120049 PG "
        "status: last enqueued work: 120051, last completed work: 120048",
        SYMPTOM,
        "nccl-timeout",
        5,
    ),
    (  # mila-iqia/milabench#269
        "[rank3]:[E909 09:55:46.996672294 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 3] "
        "Timeout at NCCL work: 2070, last enqueued NCCL work: 2082, last completed NCCL work: "
        "2069.",
        SYMPTOM,
        "nccl-timeout",
        3,
    ),
    (  # ai2cm/ace#348 (torch <= 2.1: no prefix)
        "[E ProcessGroupNCCL.cpp:457] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1132079, OpType=ALLREDUCE, NumelIn=304640, NumelOut=304640, "
        "Timeout(ms)=1800000) ran for 1800035 milliseconds before timing out.",
        SYMPTOM,
        "nccl-timeout",
        None,
    ),
    (  # the culprit's own error through the watchdog
        "[rank3]:[E512 10:21:08.164684993 ProcessGroupNCCL.cpp:2057] [PG ID 12 PG GUID "
        "35(EXPERT_MODEL_PARALLEL_GROUP) Rank 3] Process group watchdog thread terminated with "
        "exception: CUDA error: an illegal memory access was encountered",
        PRIMARY,
        "cuda-error",
        3,
    ),
    (  # leptonai/gpud parsers
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
        PRIMARY,
        "gpu-lost",
        None,
    ),
    (
        "NVRM: Xid (0000:af:00): 48, pid='<unknown>', name=<unknown>, Ch 00000008",
        PRIMARY,
        "xid",
        None,
    ),
    (  # deepspeedai/DeepSpeed launcher
        "[2024-10-01 01:17:14,772] [ERROR] [launch.py:325:sigkill_handler] ['/usr/bin/python', "
        "'-u', 'train.py', '--local_rank=4'] exits with return code = -9",
        SYMPTOM,
        "stopped",
        None,
    ),
    (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        SYMPTOM,
        "child-failed",
        None,
    ),
    (
        "[default3]:[rank139]:[E1207 03:00:13.460801783 ProcessGroupNCCL.cpp:630] [Rank 139] "
        "Some NCCL operations have failed or timed out.",
        SYMPTOM,
        "nccl-timeout",
        139,
    ),
    (
        "12: [rank12]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        PRIMARY,
        "cuda-oom",
        12,
    ),
    ("[rank7]: ValueError: bad shape in batch 17", PRIMARY, "run-crashed", 7),
    (
        "[rank7]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3763, "
        "remote process exited or there was a network error",
        SYMPTOM,
        "nccl-error",
        7,
    ),
]


def test_the_public_line_forms_are_classed() -> None:
    """Each public form: primary or symptom, its kind, and the global rank its prefix says."""
    texts = [text for text, *_ in PUBLIC_LINES]
    frame = pl.DataFrame(
        {
            "source": ["x"] * len(texts),
            "line": list(range(1, len(texts) + 1)),
            "ts": [None] * len(texts),
            "text": texts,
            "timed": [False] * len(texts),
        },
        schema_overrides={"ts": pl.Datetime("us")},
    ).with_columns(*prefixes(pl.col("text")))
    got = classed(frame).select("cls", "kind", "p_rank").rows()
    assert got == [(cls, kind, rank) for _, cls, kind, rank in PUBLIC_LINES]


def test_report_of_a_folder_titles_the_fleet_and_puts_the_verdict_first(
    fleet, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """`report DIR`: the title names the folder and `16 ranks on 2 hosts`, the verdict is the
    first thing said, and the alert table starts with the root-cause."""
    out = tmp_path / "r.html"
    code, _, err = run("report", str(fleet.root), "-o", str(out))
    assert code == 0, err
    html = out.read_text("utf-8")
    assert f"<h1>logwatch report: {fleet.root}: 16 ranks on 2 hosts</h1>" in html
    rank, host = fleet.culprit_rank, fleet.culprit_host
    assert html.index("</h1>") == html.index('<section class="verdict-box"') - len("</h1>")
    assert f"Root cause: rank {rank} ({host}): GPU fell off the bus (Xid 79) at " in html
    table = html[html.index("<h2>Alerts</h2>") :]
    assert table.index("root-cause") < table.index("gpu-lost") < table.index("nccl-timeout")


def test_darknet_batch_number_is_no_rank(tmp_path: Path) -> None:
    """darknet's `75: 625.19, 517.63 avg, ...` starts with its batch number, not `srun -l`'s
    task: its events get no rank label."""
    log = tmp_path / "yolo.log"
    log.write_text(
        "".join(
            f"{n}: 4.{n:02d}, 4.{n:02d} avg, 0.000100 rate, 3.1 seconds, 64 images\n"
            for n in range(1, 40)
        )
        + "75: nan, nan avg, 0.000100 rate, 3.1 seconds, 64 images\n"
    )
    code, out, _ = run("replay", str(log), "--format", "jsonl")
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    assert events and all("rank" not in e["labels"] for e in events)
