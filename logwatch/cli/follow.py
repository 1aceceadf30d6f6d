"""What `tail` and `top` build alike from `tail`'s options: config and rules, a secured state
directory, the tail options, and the GPU side."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from logwatch.cli.options import config_and_rules
from logwatch.config import Config
from logwatch.rules.loader import RuleSpec
from logwatch.statekey import default_state_dir


@dataclass(frozen=True, slots=True)
class Follow:
    """What `tail` and `top` set up from `tail`'s options."""

    config: Config
    specs: list[RuleSpec]
    state_dir: Path
    options: Any  # TailOptions (imported with the command)
    gpu: Any  # GpuLink | None
    gpu_line: list[str]
    notes: list[str]  # said before the banner (an older logwatch's checkpoint taken over)


def follow_setup(
    patterns: Sequence[str],
    rule_paths: Sequence[str],
    no_builtin_rules: bool,
    state_dir: Path | None,
    from_beginning: bool,
    from_end: bool,
    poll_interval: float,
    partial_flush: float,
    max_line_bytes: int,
    gpu_mode: str | None,
    gpu_interval: float | None,
    config_path: str | None,
    *,
    adjust: Callable[[Config], Config] = lambda config: config,
    max_batch_delay: float = 1.0,  # `top`'s: a view refreshed each second (tail passes 5s)
    layout: str | None = None,
    gpus_per_node: int | None = None,
    warm_up: bool = True,
    watcher: str = "auto",
) -> Follow:
    """Config, rules, a secured state directory, tail options and the GPU side, from `tail`'s
    option values (the same checks and errors, in the same order); `adjust` applies options to
    the config before anything starts (tail's --alertmanager / --metrics)."""
    from logwatch.drivers.layout import layout_pattern
    from logwatch.drivers.runner import check_patterns
    from logwatch.drivers.statesafe import secure_state_dir
    from logwatch.drivers.tail_options import StartMode, TailOptions
    from logwatch.sources.follow import FollowOptions
    from logwatch.sources.inotify import watcher_named

    if from_beginning and from_end:
        raise click.UsageError("--from-beginning and --from-end exclude each other; pick one")
    config, specs = config_and_rules(config_path, rule_paths, no_builtin_rules)
    config = adjust(config)
    notes: list[str] = []  # said first in the startup block
    if state_dir is None:
        state_dir = _watch_state(patterns, notes.append)
    secure_state_dir(state_dir)  # before the Slack sink reads silences and its spool there
    start = (
        StartMode.BEGINNING if from_beginning else StartMode.END if from_end else StartMode.CATCH_UP
    )
    try:
        watcher_named(watcher)  # inotify off Linux: said before anything starts
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if layout is not None:
        layout_pattern(layout)  # InputError for a pattern it cannot read, before anything starts
    options = TailOptions(
        start=start,
        poll_interval_s=poll_interval,
        max_batch_delay_s=max_batch_delay,
        follow=FollowOptions(partial_flush_s=partial_flush, max_line_bytes=max_line_bytes),
        layout=layout,
        gpus_per_node=gpus_per_node,
        warm_up=warm_up,
        watcher=watcher,
    )
    check_patterns(patterns)
    gpu_line: list[str] = []  # said last in the startup block, once the sinks are open too
    gpu = _gpu_link(
        gpu_mode or config.gpu.mode,
        gpu_interval if gpu_interval is not None else config.gpu.interval_s,
        specs,
        gpu_line.append,
    )
    return Follow(config, specs, state_dir, options, gpu, gpu_line, notes)


def _watch_state(patterns: Sequence[str], status: Callable[[str], None]) -> Path:
    """The default state directory of this watch (`logwatch.statekey`), made private, marked
    with its patterns, with an older logwatch's checkpoint of these files taken over."""
    from logwatch.drivers.adopt import adopt_legacy_state
    from logwatch.drivers.statesafe import secure_state_dir
    from logwatch.statekey import mark_watch, watch_state_dir

    root = default_state_dir()
    state_dir = watch_state_dir(root, patterns)
    secure_state_dir(root)  # the root first: its silences apply here, and mkdir made it 0700
    secure_state_dir(state_dir)
    mark_watch(state_dir, patterns)
    adopt_legacy_state(root, state_dir, patterns, status)
    return state_dir


def _gpu_link(
    mode: str, interval_s: float, specs: Sequence[RuleSpec], status: Callable[[str], None]
) -> Any:
    """The GPU side per the settings (`logwatch.gpu.link.start_gpu_link`), None when off."""
    from logwatch.gpu.link import start_gpu_link
    from logwatch.gpu.model import GpuSettings
    from logwatch.gpu.nvml import NvmlReader

    try:
        settings = GpuSettings.parse(mode, f"{interval_s}s")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--gpu / --gpu-interval") from None
    return start_gpu_link(settings, NvmlReader(), specs, status)
