"""The live GPU side of the engine: GPU rules over NVML sample frames, with alert lifecycles.

The tail driver feeds it each drained sample frame together with what the log side knows: since
when the log has been stalled (from `log-stalled`), and the run's pids (from the `run start:`
header) so that "the GPUs the run uses" comes from NVML's compute processes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any

import polars as pl

from logwatch.alerts import AlertEvent, Severity
from logwatch.engine import render_summary
from logwatch.engine.lifecycle import Lifecycle
from logwatch.gpu.frames import GIB, mark_run_gpus
from logwatch.rules.base import Transition
from logwatch.rules.gpu import GpuRule, HoldRule, is_gpu_rule
from logwatch.rules.loader import RuleSpec

LIVE_SOURCE = "nvml"
GPU_LOST_FIX = (
    "The GPU needs a reset or the node a reboot; drain the node, check power and cooling, then "
    "restart the run from its last checkpoint on healthy GPUs."
)


def gpu_lost_spec(fix: str = GPU_LOST_FIX) -> RuleSpec:
    """The live `gpu-lost` rule: NVML answers GpuIsLost for a device."""
    return RuleSpec(
        id="gpu-lost",
        type="gpu-hold",
        severity=Severity.CRITICAL,
        summary="NVML says GPU {labels.gpu} is lost (GpuIsLost): it fell off the bus or stopped answering",
        resolved_summary="GPU {labels.gpu} answers NVML again",
        fix=fix,
        params={},
        rule=HoldRule(condition=pl.col("lost"), hold_s=0.0),
        origin="logwatch.gpu.monitor",
    )


def live_specs(specs: Sequence[RuleSpec]) -> list[RuleSpec]:
    """The GPU rules of a loaded rule set, plus the live gpu-lost (fix from the log rule's)."""
    log_lost = next((s for s in specs if s.id == "gpu-lost"), None)
    lost = gpu_lost_spec(log_lost.fix if log_lost is not None and log_lost.fix else GPU_LOST_FIX)
    return [s for s in specs if is_gpu_rule(s.rule)] + [lost]


class GpuMonitor:
    """Runs the GPU rules over NVML frames batch by batch; one per logwatch process."""

    def __init__(self, specs: Sequence[RuleSpec], *, source: str = LIVE_SOURCE) -> None:
        self.specs = live_specs(specs)
        # Protocol isinstance checks are slow: done once here, not per batch.
        self._rules = [(s, s.rule) for s in self.specs if isinstance(s.rule, GpuRule)]
        self.source = source
        self.states: dict[str, dict[str, Any]] = {}
        self.alerts = _lifecycle()

    def process(
        self,
        samples: pl.DataFrame,
        *,
        stalled_since: datetime | None = None,
        run_pids: Collection[int] | None = None,
        step: int | None = None,
    ) -> list[AlertEvent]:
        """Alerts that fired or resolved in this batch of samples, in time order."""
        if samples.is_empty():
            return []
        frame = mark_run_gpus(samples.sort("ts", maintain_order=True), run_pids)
        stalled = (
            pl.col("ts") >= stalled_since if stalled_since is not None else pl.lit(False)
        ).alias("log_stalled")
        frame = frame.with_columns(stalled).with_row_index("_row")
        found: list[tuple[int, int, AlertEvent]] = []
        for order, (spec, rule) in enumerate(self._rules):
            state = self.states.get(spec.id) or rule.initial_state()
            transitions, self.states[spec.id] = rule.evaluate_gpu(frame, state)
            for transition in transitions:
                event = self._event(spec, frame, transition, step)
                if event is not None:
                    found.append((transition.row, order, event))
        found.sort(key=lambda item: (item[0], item[1]))
        return [event for _, _, event in found]

    def export_state(self) -> dict[str, Any]:
        """Rule states and firing alerts, JSON-able (tail checkpoints them)."""
        return {"states": self.states, "active": self.alerts.export_json()}

    def import_state(self, data: Any) -> None:
        """Restore `export_state`'s data; ValueError (and no change) when it is malformed."""
        try:
            states = {str(k): dict(v) for k, v in dict(data["states"]).items()}
            alerts = _lifecycle()
            alerts.import_json(data["active"])
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed GPU rule state: {exc!r}") from None
        self.states = states
        self.alerts = alerts

    def _event(
        self, spec: RuleSpec, frame: pl.DataFrame, transition: Transition, step: int | None
    ) -> AlertEvent | None:
        row = frame.row(transition.row, named=True)
        labels = dict(transition.labels)
        if spec.id == "gpu-lost":
            labels["via"] = LIVE_SOURCE
        event = AlertEvent(
            rule=spec.id,
            severity=spec.severity,
            status=transition.status,
            source=self.source,
            line=0,
            ts=row["ts"],
            step=step,
            value=transition.value,
            summary="",
            fix=spec.fix,
            text=describe_sample(row),
            labels=labels,
        )
        return self.alerts.step(event, spec, row)


def _lifecycle() -> Lifecycle:
    """GPU alerts: summaries in the short value format, resolves without a since-note."""
    return Lifecycle(partial(render_summary, value_format=_short), note_since=False)


def _short(value: float | None) -> str:
    return "?" if value is None else f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


def describe_sample(row: Mapping[str, Any]) -> str:
    """`gpu 3: util 2%, mem 12.0/141.0 GiB, 350 W, 61 C` (what the GPU looked like)."""
    if row.get("lost"):
        return f"gpu {row['gpu']}: lost"
    parts = [f"gpu {row['gpu']}: util {_num(row.get('util_gpu'), '%')}"]
    used, total = row.get("mem_used_bytes"), row.get("mem_total_bytes")
    if used is not None:
        of = f"/{total / GIB:.1f}" if total else ""
        parts.append(f"mem {used / GIB:.1f}{of} GiB")
    parts.append(_num(row.get("power_w"), " W"))
    parts.append(_num(row.get("temp_c"), " C"))
    return ", ".join(p for p in parts if p)


def _num(value: Any, unit: str) -> str:
    return "" if value is None else f"{value:.0f}{unit}"
