"""The run's process tree: NVML lists the processes on each GPU, the log names one pid.

A launcher (torchrun, accelerate, deepspeed) logs its own pid while its workers, its children,
hold the GPUs; matching only the logged pid would find no GPU and fall back to "all GPUs".
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

PROC = Path("/proc")


def parent_map(proc: Path = PROC) -> dict[int, int]:
    """pid -> parent pid for every process visible in /proc (empty where there is no /proc)."""
    parents: dict[int, int] = {}
    try:
        entries = os.listdir(proc)
    except OSError:
        return parents
    for name in entries:
        if not name.isdigit():
            continue
        try:
            stat = (proc / name / "stat").read_text()
        except OSError:
            continue  # the process ended while we looked
        # The command name in parentheses may hold spaces and parentheses: split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[1].isdigit():
            parents[int(name)] = int(fields[1])
    return parents


def with_descendants(pids: Collection[int], proc: Path = PROC) -> set[int]:
    """The given pids and every process below them."""
    wanted = set(pids)
    if not wanted:
        return wanted
    children: dict[int, list[int]] = {}
    for pid, parent in parent_map(proc).items():
        children.setdefault(parent, []).append(pid)
    stack = list(wanted)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in wanted:
                wanted.add(child)
                stack.append(child)
    return wanted
