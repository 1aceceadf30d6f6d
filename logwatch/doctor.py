"""`logwatch doctor`: one line per check (config, rules, Slack token and channel, Alertmanager
peers, NVML, globs)."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
        checks += _alertmanager(config)
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
    channel_check, private = _channel(client, slack.channel)
    return [*checks, channel_check, _scopes(who.headers, private)]


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


def _channel(client: Any, channel_id: str) -> tuple[Check, bool]:
    """conversations.info: the channel exists and the bot is in it; also whether it is private."""
    from slack_sdk.errors import SlackApiError

    try:
        info = client.conversations_info(channel=channel_id)
    except SlackApiError as exc:
        code = exc.response.get("error", "?")
        fix = "use the channel ID (e.g. C0123456789) and invite the bot"
        return Check("slack channel", False, f"{channel_id}: {code}", fix), False
    except Exception as exc:  # network trouble
        return Check("slack channel", False, f"{channel_id}: {exc}", "check the network"), False
    channel = info.get("channel") or {}
    private = bool(channel.get("is_private", False))
    if not channel.get("is_member", False):
        detail = f"{channel_id}: the bot is not a member"
        return Check("slack channel", False, detail, "invite the bot: /invite @your-bot"), private
    return Check("slack channel", True, f"{channel_id} (#{channel.get('name')}) reachable"), private


def _scopes(headers: Mapping[str, Any] | None, private: bool) -> Check:
    """The token's scopes (auth.test's x-oauth-scopes header): chat:write to post, the history
    scope so that a post whose answer was lost is looked up instead of posted twice."""
    raw = next((v for k, v in (headers or {}).items() if k.lower() == "x-oauth-scopes"), None)
    if isinstance(raw, list):
        raw = ",".join(raw)
    if raw is None:
        return Check("slack scopes", False, "auth.test did not report the scopes", required=False)
    scopes = {s.strip() for s in str(raw).split(",") if s.strip()}
    if "chat:write" not in scopes:
        return Check(
            "slack scopes",
            False,
            "no chat:write: the bot cannot post",
            "add the chat:write scope to the Slack app and reinstall it",
        )
    history = "groups:history" if private else "channels:history"
    if history not in scopes:
        return Check(
            "slack scopes",
            False,
            f"no {history}: after a timeout logwatch cannot check whether a post landed, "
            "so it posts again (a duplicate is possible)",
            "add the channels:history and groups:history scopes to the Slack app and reinstall "
            "it, for exactly-once delivery after timeouts",
            required=False,
        )
    return Check("slack scopes", True, f"chat:write and {history} granted")


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
