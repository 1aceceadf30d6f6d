"""The `[[webhook]]` config tables: where to post (a secret: `url` or `url_file`), the request
deadline, extra headers (secrets too: `headers_file`). Read with the config's `TableReader`, so
every mistake is `file:line: what is wrong`; URL and headers are registered as secrets and never
shown, not even in errors."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from logwatch.durations import parse_duration
from logwatch.redact import register_secret
from logwatch.tablereader import TableReader, show

WEBHOOK_KEYS = {"url", "url_file", "timeout", "headers_file"}
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """One `[[webhook]]`; secrets kept out of repr."""

    url: str = field(repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    name: str = "webhook 1"  # how it is said: its place in the config, never its URL

    @property
    def key(self) -> str:
        """A stable name for its spool that does not reveal the URL."""
        return hashlib.sha256(self.url.encode()).hexdigest()[:12]


def read_webhooks(reader: TableReader, items: Any) -> tuple[WebhookConfig, ...]:
    """Every `[[webhook]]` table of a config, checked."""
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise reader.fail(
            reader.key_line(None, "webhook"), "'webhook' must be [[webhook]] tables (an array)"
        )
    header = re.compile(r"^\s*\[\[\s*\"?webhook\"?\s*\]\]")
    lines = [n for n, line in enumerate(reader.lines, 1) if header.match(line)]
    return tuple(
        _Webhook(reader, lines[i] if i < len(lines) else 1, i + 1).read(table)
        for i, table in enumerate(items)
    )


class _Webhook:
    def __init__(self, reader: TableReader, header: int, number: int) -> None:
        self.reader, self.header, self.number = reader, header, number

    def at(self, key: str) -> int:
        return self.reader.entry_key_line(self.header, key)

    def fail(self, key: str | None, message: str) -> Exception:
        return self.reader.fail(self.at(key) if key else self.header, f"[[webhook]] {message}")

    def string(self, data: Mapping[str, Any], key: str) -> str | None:
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            shown = "a string" if key == "url" else show(value)  # never echo a URL
            raise self.fail(key, f"{key!r} must be a string, got {shown}")
        return value

    def path(self, name: str) -> Path:
        return (self.reader.file.parent / Path(name).expanduser()).resolve()

    def read_file(self, key: str, name: str) -> str:
        path = self.path(name)
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not UTF-8 text"
            raise self.fail(key, f"{key} {str(path)!r}: cannot read: {reason}") from None

    def read(self, data: Mapping[str, Any]) -> WebhookConfig:
        for key in data:
            if key not in WEBHOOK_KEYS:
                raise self.fail(
                    key, f"unknown key {key!r} (expected one of: {', '.join(sorted(WEBHOOK_KEYS))})"
                )
        url = self.url(data)
        register_secret(url)
        timeout = self.string(data, "timeout")
        try:
            timeout_s = parse_duration(timeout) if timeout is not None else DEFAULT_TIMEOUT_S
        except ValueError as exc:
            raise self.fail("timeout", f"'timeout': {exc}") from None
        if timeout_s <= 0:
            raise self.fail("timeout", "'timeout' must be more than 0s")
        return WebhookConfig(
            url=url, timeout_s=timeout_s, headers=self.headers(data), name=f"webhook {self.number}"
        )

    def url(self, data: Mapping[str, Any]) -> str:
        given, name = self.string(data, "url"), self.string(data, "url_file")
        if (given is None) == (name is None):
            raise self.fail(
                None,
                "needs exactly one of 'url' or 'url_file' (a file holding the URL: keeps the "
                "secret out of the config)",
            )
        key = "url" if given is not None else "url_file"
        if name is not None:
            lines = [line.strip() for line in self.read_file(key, name).splitlines()]
            given = next((line for line in lines if line), "")
        assert given is not None
        parts = urlsplit(given.strip())
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            if given:
                register_secret(given)  # whatever it is, it was meant to be secret
            raise self.fail(key, "the URL must be http:// or https:// with a host")
        return given.strip()

    def headers(self, data: Mapping[str, Any]) -> dict[str, str]:
        name = self.string(data, "headers_file")
        if name is None:
            return {}
        headers: dict[str, str] = {}
        for number, line in enumerate(self.read_file("headers_file", name).splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, sep, value = line.partition(":")
            if not sep or not HEADER_NAME.match(key.strip()):
                raise self.fail(
                    "headers_file",
                    f"headers_file {str(self.path(name))!r} line {number}: expected "
                    "'Name: value' (e.g. 'Authorization: Bearer ...')",
                )
            headers[key.strip()] = value.strip()
            if value.strip():
                register_secret(value.strip())
        return headers
