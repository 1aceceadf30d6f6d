"""What `logwatch doctor` checks of Slack, through slack_sdk: the bot token, the channel and
the token's scopes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logwatch.checks import Check
from logwatch.config import SlackConfig


def slack_checks(slack: SlackConfig) -> list[Check]:
    """The bot token (auth.test), the channel (conversations.info) and the token's scopes; a
    webhook is not tested (a test would post a message)."""
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
    return [*checks, channel_check, _scopes(who.headers, private), *_buttons(slack, who.headers)]


def _buttons(slack: SlackConfig, headers: Mapping[str, Any] | None) -> list[Check]:
    """With app_token_file: the app-level token opens a Socket Mode connection URL
    (apps.connections.open; nothing is connected), and allowed_groups can be listed."""
    if slack.buttons is None:
        return []
    from slack_sdk import WebClient
    from slack_sdk.errors import SlackApiError

    app = WebClient(
        base_url=slack.base_url, timeout=int(max(slack.timeout_s, 1)), retry_handlers=[]
    )
    fix = (
        "an app-level token (xapp-...) with connections:write in [slack] app_token_file, and "
        "Socket Mode and Interactivity turned on in the app's settings"
    )
    try:
        app.apps_connections_open(app_token=slack.buttons.app_token)
    except SlackApiError as exc:
        code = exc.response.get("error", f"HTTP {exc.response.status_code}")
        return [Check("slack buttons", False, f"apps.connections.open: {code}", fix)]
    except Exception as exc:  # network trouble
        return [Check("slack buttons", False, f"apps.connections.open: {exc}", "check the network")]
    users, groups = len(slack.buttons.allowed_users), len(slack.buttons.allowed_groups)
    checks = [
        Check("slack buttons", True, f"Socket Mode ok; {users} allowed user(s), {groups} group(s)")
    ]
    raw = next((v for k, v in (headers or {}).items() if k.lower() == "x-oauth-scopes"), "")
    if groups and "usergroups:read" not in str(raw):
        checks.append(
            Check(
                "slack groups",
                False,
                "no usergroups:read: members of allowed_groups cannot be checked, so they "
                "cannot press",
                "add the usergroups:read scope to the Slack app and reinstall it",
                required=False,
            )
        )
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
