"""`[slack]`'s button keys: `app_token_file` (an `xapp-` app-level token for Socket Mode, a
secret: registered, never shown, not even in errors), `allowed_users` and `allowed_groups` (who
may press). Read with the config's `TableReader`, so every mistake is `file:line: what is wrong`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logwatch.redact import register_secret
from logwatch.tablereader import TableReader, show

BUTTON_KEYS = {"app_token_file", "allowed_users", "allowed_groups"}
USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
GROUP_ID = re.compile(r"^S[A-Z0-9]{2,}$")


@dataclass(frozen=True, slots=True)
class ButtonsConfig:
    """Buttons on alert messages, pressed over Socket Mode; the token kept out of repr."""

    app_token: str = field(repr=False)
    allowed_users: tuple[str, ...] = ()
    allowed_groups: tuple[str, ...] = ()


def read_buttons(reader: TableReader, data: Mapping[str, Any]) -> ButtonsConfig | None:
    """The button settings of a `[slack]` table; None without `app_token_file` (no buttons)."""
    users = _ids(reader, data, "allowed_users", USER_ID, '["U0123ABCD"] (Slack member IDs)')
    groups = _ids(reader, data, "allowed_groups", GROUP_ID, '["S0123ABCD"] (user group IDs)')
    name = reader.typed("slack", data, "app_token_file", str, None)
    if name is None:
        if users or groups:
            raise reader.fail(
                reader.key_line("slack", "allowed_users" if users else "allowed_groups"),
                "allowed_users / allowed_groups say who may press the alert buttons, but there "
                "are no buttons without [slack] app_token_file (an xapp- token with Socket Mode)",
            )
        return None
    at = reader.key_line("slack", "app_token_file")
    token = _token(reader, at, Path(name))
    if not users and not groups:
        raise reader.fail(
            at,
            "[slack] app_token_file turns on the alert buttons: say who may press them with "
            'allowed_users = ["U0123ABCD"] (Slack member IDs) and/or allowed_groups = ["S0123ABCD"]',
        )
    return ButtonsConfig(app_token=token, allowed_users=users, allowed_groups=groups)


def _token(reader: TableReader, at: int, name: Path) -> str:
    path = (reader.file.parent / name.expanduser()).resolve()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise reader.fail(at, f"app_token_file {str(path)!r}: cannot read: {reason}") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    token = lines[0] if lines else ""
    if token:
        register_secret(token)  # before any message could show it
    if not token.startswith("xapp-"):
        raise reader.fail(
            at,
            f"app_token_file {str(path)!r} must hold an app-level token (xapp-..., made under "
            "Basic Information > App-Level Tokens with the connections:write scope)",
        )
    return token


def _ids(
    reader: TableReader, data: Mapping[str, Any], key: str, shape: re.Pattern[str], example: str
) -> tuple[str, ...]:
    value = reader.typed("slack", data, key, list, [])
    bad = [v for v in value if not isinstance(v, str) or not shape.match(v)]
    if bad:
        raise reader.fail(
            reader.key_line("slack", key),
            f"{key!r} must be a list of IDs like {example}, got {show(bad[0])}",
        )
    return tuple(value)
