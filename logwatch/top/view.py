"""`logwatch top` on screen: a frozen `Screen` (everything one frame shows) to rich renderables,
and to plain lines for a pipe. Log-derived text goes through `visible(redact(...))` into
`rich.text.Text`, never into markup, so a log line can neither style nor control the terminal."""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from logwatch.alerts import FIRING, AlertEvent, Severity
from logwatch.redact import redact, visible
from logwatch.top.detail import detail_view
from logwatch.top.layout import ALERTS, SOURCE, Layout, cell_len, cut_left, fit
from logwatch.top.plugin import SourceRow
from logwatch.words import counted

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.text import Text

SPARK = "▁▂▃▄▅▆▇█"
NONFINITE_MARK = "!"
STALL_MARK = "STALL"
SEVERITY_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
HELP = (
    ("q", "quit (checkpoint written, as SIGTERM)"),
    ("/", "filter sources by name or run (Enter keeps it, Esc clears)"),
    ("j k / arrows", "select a source"),
    ("Enter", "the selected source's firing alerts: summary, fix, log line (any key closes)"),
    ("s", "silence the selected source's first unsilenced firing alert for 1 h (asks y/n)"),
    ("u", "lift the silences muting the selected source's alerts"),
    ("?", "this help (any key closes it)"),
)


@dataclass(frozen=True, slots=True)
class GpuRow:
    """One GPU as the view shows it, with the runs whose processes are on it."""

    index: int
    name: str
    util: float | None
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    power_w: float | None
    temp_c: float | None
    ecc: int | None
    lost: bool
    runs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Screen:
    """Everything one frame shows; two equal screens draw the same, so only a change redraws."""

    width: int
    height: int
    now_s: int
    rows: tuple[SourceRow, ...]
    selected: int = 0
    filter_text: str = ""
    filtering: bool = False
    help: bool = False
    detail: bool = False  # the selected source's firing alerts in full (Enter)
    asking: str = ""  # a question waiting for y / n (`s`)
    gpu_line: str | None = None  # NVML unavailable / off: the one line saying so
    gpus: tuple[GpuRow, ...] = ()
    recent: tuple[tuple[float, AlertEvent], ...] = ()
    other_firing: tuple[AlertEvent, ...] = ()  # GPU / NVML alerts, not on a followed source
    silenced: frozenset[str] = field(default_factory=frozenset)  # fingerprints
    message: str = ""
    footer: tuple[str, ...] = ()


@functools.lru_cache(maxsize=4096)
def safe(text: str) -> str:
    """Log or file text as the terminal may show it: secrets masked, controls escaped (cached:
    the same source names and rule ids come back every frame)."""
    return visible(redact(text))


def shown_rows(screen: Screen) -> tuple[SourceRow, ...]:
    """The rows the filter lets through."""
    needle = screen.filter_text.lower()
    if not needle:
        return screen.rows
    return tuple(r for r in screen.rows if needle in r.source.lower() or needle in (r.run or ""))


# --- small formats ------------------------------------------------------------------------


AGE_STEP_S = 5
"""Ages under a minute are shown in steps of this many seconds (`0s`, `5s`, ... `55s`)."""


def fmt_age(seconds: float | None) -> str:
    """`5s`, `3m`, `2h04m`, `3d04h`; `-` when unknown. Under a minute in 5 s steps, past it only
    whole minutes: a quiet view changes, and redraws, every 5 s in its first minute and once a
    minute after (a stall threshold is minutes; a heartbeat every 5 s is enough to see)."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s - s % AGE_STEP_S}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def seconds_shown(screen: Screen) -> bool:
    """Whether some age on screen is under a minute, so shown in 5 s steps (changing every 5 s);
    past that, ages and the clock change once a wall-clock minute."""
    times = [r.last_line_s for r in screen.rows if r.last_line_s is not None]
    times += [e.ts.timestamp() for r in screen.rows for e in r.alerts if e.ts is not None]
    return any(screen.now_s - t < 60 for t in times)


def fmt_float(value: float | None, digits: int = 4) -> str:
    """A metric in a few characters; `nan` / `inf` kept visible."""
    if value is None:
        return "-"
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}g}"


def fmt_count(value: float | None) -> str:
    """`48.3k`, `1.2M`."""
    if value is None:
        return "-"
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}"
    return f"{value:.0f}"


def trend(values: Sequence[float]) -> str:
    """↑ / ↓ / → : the mean of the last five against the five before."""
    if len(values) < 4:
        return ""
    half = min(5, len(values) // 2)
    new, old = values[-half:], values[-2 * half : -half]
    a, b = sum(new) / len(new), sum(old) / len(old)
    if b == 0 or abs(a - b) / abs(b) < 0.02:
        return "→"
    return "↑" if a > b else "↓"


def spark_cells(values: Sequence[float], width: int) -> list[str]:
    """One block character per value (the last `width`), `!` for NaN / Inf."""
    tail = list(values)[-width:] if width > 0 else []
    finite = [v for v in tail if math.isfinite(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    span = high - low
    cells = []
    for v in tail:
        if not math.isfinite(v):
            cells.append(NONFINITE_MARK)
        else:
            level = 0 if span == 0 else int((v - low) / span * (len(SPARK) - 1))
            cells.append(SPARK[level])
    return cells


def bucket_bar(buckets: Sequence[int]) -> str:
    """`q_hsb` as one block per bucket, scaled to the fullest."""
    if not buckets:
        return ""
    top = max(buckets) or 1
    return "".join(" " if b <= 0 else SPARK[min(7, int(b / top * 7))] for b in buckets)


# --- rich -----------------------------------------------------------------------------------


def render(screen: Screen) -> RenderableType:
    """The whole frame, fitted to `screen.height` lines."""
    from rich.console import Group
    from rich.text import Text

    gpu_lines = _gpu_lines(screen)
    events = _event_lines(screen)
    fixed = 1 + 1 + len(gpu_lines) + 1 + len(events) + 1 + len(screen.footer)
    budget = max(1, screen.height - fixed - 1)
    body: RenderableType = _table(screen, budget)
    if screen.help:
        body = _help()
    elif screen.detail:
        body = _detail(screen, budget)
    header = _header(screen)
    header.no_wrap, header.overflow = True, "ellipsis"  # one line at any width
    parts: list[RenderableType] = [header, body, *gpu_lines]
    parts.append(Text("recent alerts", style="bold") if events else Text(""))
    parts += events
    parts.append(_message(screen))
    parts += [Text(line, style="dim", no_wrap=True, overflow="ellipsis") for line in screen.footer]
    return Group(*parts)


def _detail(screen: Screen, budget: int) -> RenderableType:
    rows = shown_rows(screen)
    if not rows:
        return _table(screen, budget)
    row = rows[min(screen.selected, len(rows) - 1)]
    name = display_names(screen.rows)[row.source]
    return detail_view(row.alerts, name, screen.silenced, budget + 1)


def _header(screen: Screen) -> Text:
    from rich.text import Text

    firing = sum(len(r.alerts) for r in screen.rows) + len(screen.other_firing)
    clock = time.strftime("%H:%M", time.localtime(screen.now_s))
    text = Text(f"logwatch top · {counted(len(screen.rows), 'source')} · ", style="bold")
    text.append(f"{firing} firing", style="bold red" if firing else "green")
    text.append(f" · {clock}   ? help")
    return text


def display_names(rows: Sequence[SourceRow]) -> dict[str, str]:
    """Sources without the folder they all share (`/runs/a/train.log` -> `a/train.log`)."""
    return _display_names(tuple(r.source for r in rows))


@functools.lru_cache(maxsize=8)
def _display_names(sources: tuple[str, ...]) -> dict[str, str]:
    if len(sources) < 1:
        return {}
    folder = os.path.commonpath(sources) if all(s.startswith("/") for s in sources) else ""
    if len(sources) == 1:
        folder = os.path.dirname(sources[0])
    cut = len(folder) + 1 if folder and folder != "/" else 0
    return {s: safe(s[cut:] or s) for s in sources}


def table_layout(screen: Screen) -> Layout:
    """The columns this frame's width and source names allow (`logwatch.top.layout.fit`)."""
    names = display_names(screen.rows)
    longest = max((cell_len(n) for n in names.values()), default=0)
    return fit(screen.width, longest)


def _table(screen: Screen, budget: int) -> RenderableType:
    from rich.console import Group
    from rich.text import Text

    rows = shown_rows(screen)
    if not rows:
        what = f" matching '{safe(screen.filter_text)}'" if screen.filter_text else " yet"
        return Text(f"no sources{what}", style="dim")
    layout = table_layout(screen)
    names = display_names(screen.rows)
    header = _fixed(Text(SOURCE), layout.source_w)
    for name, width in layout.columns:
        header.append(" ").append_text(_fixed(Text(name), width))
    header.append(" ").append_text(_fixed(Text(ALERTS), layout.alerts_w))
    header.stylize("bold")
    lines: list[Text] = []
    selected = min(screen.selected, len(rows) - 1)
    for index, row in enumerate(rows):
        line = _row_line(row, screen, names[row.source], layout)
        if index == selected:
            line.stylize("reverse")
        lines.append(line)
        if index >= selected and len(lines) >= budget:
            break
    return Group(header, *lines[-budget:])


def _fixed(text: Text, width: int) -> Text:
    text = text.copy()
    text.no_wrap, text.overflow = True, "ellipsis"
    text.truncate(width, overflow="ellipsis", pad=True)
    return text


def _row_line(row: SourceRow, screen: Screen, name: str, layout: Layout) -> Text:
    """One source's row: exactly one line, each cell cut to its column (`…`)."""
    from rich.text import Text

    widths = dict(layout.columns)
    cells = _cells(row, screen, widths.get("trend", 0), widths.get("q_hs", 0))
    line = _fixed(Text(cut_left(name, layout.source_w)), layout.source_w)
    for column, width in layout.columns:
        line.append(" ").append_text(_fixed(cells[column], width))
    line.append(" ").append_text(_fixed(cells[ALERTS], layout.alerts_w))
    line.rstrip()
    return line


def _cells(row: SourceRow, screen: Screen, spark_w: int, q_hs_w: int) -> dict[str, Text]:
    from rich.text import Text

    age = None if row.last_line_s is None else screen.now_s - row.last_line_s
    last = Text(fmt_age(age))
    if row.stalled:
        last = Text(f"{STALL_MARK} {fmt_age(age)}", style="bold red")
    loss = row.losses[-1] if row.losses else None
    loss_style = "bold red" if loss is not None and not math.isfinite(loss) else ""
    spark = Text()
    for cell in spark_cells(row.losses, spark_w):
        spark.append(cell, style="bold red" if cell == NONFINITE_MARK else "cyan")
    tput = row.throughput[-1] if row.throughput else None
    q = Text("-" if row.q_hs is None else str(row.q_hs))
    bar = bucket_bar(row.q_hsb)
    if bar and len(q) + 1 + len(bar) <= q_hs_w:  # narrower, the count alone says more
        q.append(" " + bar, style="magenta")
    return {
        "run": Text(safe(row.run or "-")),
        "step": Text("-" if row.step is None else str(row.step)),
        "/s": Text(fmt_float(row.steps_per_s, 3)),
        "last": last,
        "loss": Text(fmt_float(loss), style=loss_style),
        "trend": spark,
        "gnorm": Text(fmt_float(row.grad_norm, 3)),
        "lr": Text(fmt_float(row.lr, 2)),
        "tok/s": Text(fmt_count(tput) + trend(row.throughput)),
        "q_hs": q,
        "alerts": _alerts_cell(row.alerts, screen),
    }


def _alerts_cell(alerts: Sequence[AlertEvent], screen: Screen) -> Text:
    from rich.text import Text

    text = Text()
    for event in alerts:
        if text:
            text.append(" ")
        age = fmt_age(screen.now_s - event.ts.timestamp()) if event.ts else ""
        muted = event.fingerprint in screen.silenced
        style = "dim" if muted else SEVERITY_STYLE[event.severity]
        shown = " ".join(part for part in (safe(event.rule), age) if part)
        text.append(shown + (" (silenced)" if muted else ""), style=style)
    return text


def _gpu_lines(screen: Screen) -> list[Text]:
    from rich.text import Text

    if screen.gpu_line is not None:
        return [Text(safe(screen.gpu_line), style="yellow", no_wrap=True, overflow="ellipsis")]
    room = max(1, (screen.height - 12) // 3)
    lines = [Text(gpu_text(g), no_wrap=True, overflow="ellipsis") for g in screen.gpus[:room]]
    if len(screen.gpus) > room:
        lines.append(Text(f"+{len(screen.gpus) - room} more GPUs", style="dim"))
    return lines or [Text("GPUs: no sample yet", style="dim")]


def gpu_text(gpu: GpuRow) -> str:
    """`GPU0 NVIDIA H200 util 98% mem 71/141G 312W 64C ecc 0 run slammed2`."""
    if gpu.lost:
        return f"GPU{gpu.index} {safe(gpu.name)} LOST (fallen off the bus)"
    gib = 1 << 30
    used = "-" if gpu.mem_used_bytes is None else f"{gpu.mem_used_bytes / gib:.0f}"
    total = "-" if gpu.mem_total_bytes is None else f"{gpu.mem_total_bytes / gib:.0f}G"
    parts = [
        f"GPU{gpu.index} {safe(gpu.name)}",
        f"util {fmt_float(gpu.util, 3)}%",
        f"mem {used}/{total}",
        f"{fmt_float(gpu.power_w, 3)}W",
        f"{fmt_float(gpu.temp_c, 3)}C",
        f"ecc {'-' if gpu.ecc is None else gpu.ecc}",
        "run " + (", ".join(safe(r) for r in gpu.runs) or "-"),
    ]
    return "  ".join(parts)


def _event_lines(screen: Screen) -> list[Text]:
    from rich.text import Text

    room = 3 if screen.height < 30 else 6
    names = display_names(screen.rows)
    lines = []
    for _arrived, event in screen.recent[-room:]:
        style = SEVERITY_STYLE[event.severity] if event.status == FIRING else "green"
        text = event_text(event, names.get(event.source))
        lines.append(Text(text, style=style, no_wrap=True, overflow="ellipsis"))
    return lines


def event_text(event: AlertEvent, name: str | None = None) -> str:
    """`14:03:07 FIRING nan-loss train.log:111 loss is nan at step 1403`."""
    when = f"{event.ts:%H:%M:%S}" if event.ts else "--:--:--"
    status = "FIRING" if event.status == FIRING else "RESOLVED"
    source = safe(event.source) if name is None else name
    where = f"{source}:{event.line}" if event.line else source
    return f"{when} {status} {safe(event.rule)} {where} {safe(event.summary)}"


def _message(screen: Screen) -> Text:
    from rich.text import Text

    if screen.filtering:
        return Text(f"filter: {safe(screen.filter_text)}▏", style="bold")
    if screen.asking:
        return Text(screen.asking, style="bold reverse", no_wrap=True, overflow="ellipsis")
    return Text(safe(screen.message), style="italic", no_wrap=True, overflow="ellipsis")


def _help() -> RenderableType:
    from rich.table import Table

    table = Table(box=None, show_header=False, padding=(0, 2), title="keys", title_justify="left")
    for key, what in HELP:
        table.add_row(key, what)
    return table


# --- plain (stdout is not a terminal) -------------------------------------------------------


def plain_lines(rows: Sequence[SourceRow], now_s: float) -> list[str]:
    """One status line per source: what the view's row says, without escapes."""
    out = []
    for row in rows:
        age = None if row.last_line_s is None else now_s - row.last_line_s
        loss = row.losses[-1] if row.losses else None
        tput = row.throughput[-1] if row.throughput else None
        alerts = ",".join(e.rule for e in row.alerts) or "-"
        fields = [
            row.source,
            f"run={row.run or '-'}",
            f"step={'-' if row.step is None else row.step}",
            f"steps/s={fmt_float(row.steps_per_s, 3)}",
            f"last={fmt_age(age)}{' STALLED' if row.stalled else ''}",
            f"loss={fmt_float(loss)}",
            f"grad_norm={fmt_float(row.grad_norm, 3)}",
            f"lr={fmt_float(row.lr, 2)}",
            f"tok/s={fmt_count(tput)}",
            f"q_hs={'-' if row.q_hs is None else row.q_hs}",
            f"alerts={alerts}",
        ]
        out.append(safe(" ".join(fields)))
    return out
