"""`logwatch doctor`: one line per check (config, rules, Slack token and channel, NVML, globs)."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from logwatch.config import Config, config_rules, find_config, load_config
from logwatch.errors import LogwatchError
from logwatch.redact import redact


@dataclass(frozen=True, slots=True)
class Check:
    """One check's outcome; a failed required check makes doctor exit 1."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True

    def line(self) -> str:
        """As doctor prints it."""
        tag = "ok  " if self.ok else ("FAIL" if self.required else "warn")
        text = f"{tag} {self.name}: {self.detail}"
        if not self.ok and self.fix:
            text += f" — fix: {self.fix}"
        return redact(text)


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
    return Check("rule packs", True, f"{len(specs)} rules enabled")


def _slack(config: Config) -> list[Check]:
    slack = config.slack
    if slack is None:
        return [Check("slack", True, "not configured (no [slack] table)", required=False)]
    if slack.webhook_url:
        return [Check("slack", True, "webhook mode (not tested: a test would post a message)")]
    from slack_sdk import WebClient
    from slack_sdk.errors import SlackApiError

    client = WebClient(
        token=slack.token,
        base_url=slack.base_url,
        timeout=int(max(slack.timeout_s, 1)),
        retry_handlers=[],
    )
    try:
        who = client.auth_test()
    except SlackApiError as exc:
        code = exc.response.get("error", f"HTTP {exc.response.status_code}")
        return [
            Check(
                "slack token",
                False,
                f"auth.test: {code}",
                "check SLACK_BOT_TOKEN / [slack] token_file (a bot token, xoxb-...)",
            )
        ]
    except Exception as exc:  # network: URLError, timeout, ...
        return [
            Check(
                "slack token",
                False,
                f"auth.test: cannot reach {slack.base_url}: {exc}",
                "check the network / [slack] base_url",
            )
        ]
    checks = [
        Check("slack token", True, f"auth.test ok (team {who.get('team')}, bot {who.get('user')})")
    ]
    try:
        info = client.conversations_info(channel=slack.channel)
    except SlackApiError as exc:
        code = exc.response.get("error", "?")
        return [
            *checks,
            Check(
                "slack channel",
                False,
                f"{slack.channel}: {code}",
                "use the channel ID (e.g. C0123456789) and invite the bot",
            ),
        ]
    except Exception as exc:  # network trouble
        return [
            *checks,
            Check("slack channel", False, f"{slack.channel}: {exc}", "check the network"),
        ]
    channel = info.get("channel") or {}
    if not channel.get("is_member", False):
        return [
            *checks,
            Check(
                "slack channel",
                False,
                f"{slack.channel}: the bot is not a member",
                "invite the bot: /invite @your-bot",
            ),
        ]
    return [
        *checks,
        Check("slack channel", True, f"{slack.channel} (#{channel.get('name')}) reachable"),
    ]


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
            f"{len(unreadable)} of {len(files)} files unreadable, e.g. {unreadable[0]}",
            "run as a user who can read the logs",
        )
    return Check(f"glob {pattern}", True, f"{len(files)} readable file(s)")
