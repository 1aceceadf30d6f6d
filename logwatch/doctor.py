"""`logwatch doctor`: one line per check (config, rules, Slack token and channel, Alertmanager
peers, NVML, globs)."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Mapping, Sequence

from logwatch.checks import Check
from logwatch.config import Config, config_rules, find_config, load_config
from logwatch.errors import LogwatchError
from logwatch.words import counted


def check_nvml() -> tuple[bool, str, str]:
    """Whether NVML works here, through the GPU side's own reader: (ok, detail, fix). The reason
    classes and fixes are the ones `tail` prints (library missing, driver not loaded,
    driver/library mismatch, no permission, nvidia-ml-py missing...)."""
    from logwatch.gpu.nvml import NvmlReader

    reader = NvmlReader()
    try:
        status = reader.init()
    finally:
        reader.close()
    if status.available:
        return True, f"NVML works: {status.hardware()}", ""
    detail = status.reason.value if status.reason is not None else "unavailable"
    if status.detail:
        detail += f" ({status.detail})"
    return False, detail, status.fix


def run_doctor(
    config_path: str | None,
    globs: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    nvml: Callable[[], tuple[bool, str, str]] = check_nvml,
) -> list[Check]:
    """Run every check; never raises for what it checks."""
    checks: list[Check] = []
    path = find_config(config_path)
    try:
        config = load_config(path, env)
        checks.append(
            Check("config", True, str(path) if path else "no config file (defaults; no Slack)")
        )
    except LogwatchError as exc:
        checks.append(Check("config", False, str(exc), "correct the line named above"))
        config = None
    if config is not None:
        checks.append(_rules(config))
        checks += _slack(config)
        checks += _alertmanager(config)
        if config.actions:
            from logwatch.actions.checks import action_checks

            checks += action_checks(config.actions, os.environ if env is None else env)
    ok, detail, fix = nvml()
    required = config is not None and config.gpu.mode == "required"
    if config is not None and config.gpu.mode == "off":
        checks.append(Check("nvml", True, 'skipped ([gpu] mode = "off")'))
    else:
        checks.append(Check("nvml", ok, detail, fix, required=required))
    checks += [_glob(pattern) for pattern in globs]
    return checks


def _rules(config: Config) -> Check:
    try:
        specs = config_rules(config)
    except LogwatchError as exc:
        return Check(
            "rule packs", False, str(exc), "correct the rule pack or [rules] table named above"
        )
    return Check("rule packs", True, f"{counted(len(specs), 'rule')} enabled")


def _slack(config: Config) -> list[Check]:
    if config.slack is None:
        return [Check("slack", True, "not configured (no [slack] table)", required=False)]
    from logwatch.sinks.slack.checks import slack_checks  # Slack's library loads only here

    return slack_checks(config.slack)


def _alertmanager(config: Config) -> list[Check]:
    """Each Alertmanager peer takes a post, through tail's own client (auth, TLS, deadline): an
    empty list of alerts, which Alertmanager accepts and which alerts nobody."""
    am = config.alertmanager
    if am is None:
        return []
    import threading

    from logwatch.sinks.alertmanager.peers import FIXES, PostError, make_client

    checks = []
    for url in am.urls:
        name = f"alertmanager {url}"
        try:
            make_client(url, am).post(b"[]", threading.Event())
        except PostError as exc:
            checks.append(Check(name, False, f"POST /api/v2/alerts: {exc}", FIXES[exc.kind]))
            continue
        checks.append(Check(name, True, "POST /api/v2/alerts accepted"))
    return checks


def _glob(pattern: str) -> Check:
    files = [p for p in glob.glob(os.path.expanduser(pattern), recursive=True) if os.path.isfile(p)]
    if not files:
        return Check(
            f"glob {pattern}",
            False,
            "matches no file",
            "check the path; quote the glob so the shell does not expand it",
        )
    unreadable = [p for p in files if not os.access(p, os.R_OK)]
    if unreadable:
        return Check(
            f"glob {pattern}",
            False,
            f"{len(unreadable)} of {counted(len(files), 'file')} unreadable, e.g. {unreadable[0]}",
            "run as a user who can read the logs",
        )
    return Check(f"glob {pattern}", True, f"{counted(len(files), 'readable file')}")
