"""The `[alertmanager]` and `[prometheus]` config tables: many nodes, one fleet view.

Read with the config file's `TableReader` (passed in as `reader`), so every mistake is
`file:line: what is wrong` like the other tables; `config.py` imports this module, never the
other way round. Credentials come from environment variables or files, are
registered as secrets, and are kept out of repr.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit

from logwatch.errors import ConfigError
from logwatch.redact import register_secret
from logwatch.tablereader import TableReader

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    class _ClusterTables(DataclassInstance, Protocol):
        """A config with the two tables (`config.Config` is one), as the options see it."""

        @property
        def alertmanager(self) -> AlertmanagerConfig | None: ...

        @property
        def prometheus(self) -> PrometheusConfig | None: ...


ConfigT = TypeVar("ConfigT", bound="_ClusterTables")

AM_KEYS = {
    "urls",
    "resend_interval",
    "timeout",
    "labels",
    "generator_url",
    "bearer_token_env",
    "bearer_token_file",
    "basic_auth_username",
    "basic_auth_password_env",
    "basic_auth_password_file",
    "ca_file",
    "cert_file",
    "key_file",
    "insecure_skip_verify",
}
PROMETHEUS_KEYS = {"listen", "textfile_dir"}
LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED_LABELS = frozenset({"alertname", "severity", "host", "source", "run"})


@dataclass(frozen=True, slots=True)
class AlertmanagerConfig:
    """Where alerts go in a fleet: every HA peer, how often firing alerts are re-posted."""

    urls: tuple[str, ...]
    resend_interval_s: float = 60.0
    timeout_s: float = 10.0
    labels: Mapping[str, str] = field(default_factory=dict)
    generator_url: str | None = None  # `{run}`, `{source}`, `{rule}`, `{host}` are filled in
    bearer_token: str | None = field(default=None, repr=False)
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False

    def with_urls(self, urls: Sequence[str]) -> AlertmanagerConfig:
        """The same settings with `tail --alertmanager URL...` in place of the table's urls."""
        return replace(self, urls=tuple(check_url(url, "--alertmanager") for url in urls))


@dataclass(frozen=True, slots=True)
class PrometheusConfig:
    """Where metrics are exposed: `/metrics` on `listen`, or a textfile-collector folder."""

    listen: str | None = None  # HOST:PORT
    textfile_dir: Path | None = None


def check_url(url: str, where: str) -> str:
    """An Alertmanager base URL (`http://am-0:9093`, a route prefix allowed); ConfigError else."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ConfigError(
            f"{where}: {url!r} is not an Alertmanager URL (expected http://HOST:PORT, e.g. "
            "http://am-0:9093)"
        )
    if parts.password:
        register_secret(parts.password)
    return url.rstrip("/")


def parse_listen(text: str, where: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 in brackets) as (host, port); ConfigError naming the fix else."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(
            f"{where}: {text!r} is not HOST:PORT (e.g. 127.0.0.1:9808, or 0.0.0.0:9808 for "
            "every interface)"
        )
    return host, int(port)


def read_alertmanager(reader: TableReader, data: Mapping[str, Any]) -> AlertmanagerConfig:
    """The `[alertmanager]` table, validated."""
    reader.check_keys("alertmanager", data, AM_KEYS)
    urls = reader.typed("alertmanager", data, "urls", list, [])
    at = reader.key_line("alertmanager", "urls")
    if not urls or not all(isinstance(u, str) for u in urls):
        raise reader.fail(
            at,
            "[alertmanager] needs 'urls', a list of every Alertmanager peer "
            '(e.g. urls = ["http://am-0:9093", "http://am-1:9093"])',
        )
    checked = tuple(check_url(u, f"{reader.file}:{at}") for u in urls)
    resend = reader.duration("alertmanager", data, "resend_interval", 60.0)
    timeout = reader.duration("alertmanager", data, "timeout", 10.0)
    for key, value in (("resend_interval", resend), ("timeout", timeout)):
        if value <= 0:
            raise reader.fail(reader.key_line("alertmanager", key), f"{key!r} must be more than 0s")
    return AlertmanagerConfig(
        urls=checked,
        resend_interval_s=resend,
        timeout_s=timeout,
        labels=_labels(reader, data),
        generator_url=reader.typed("alertmanager", data, "generator_url", str, None),
        bearer_token=_secret(reader, data, "bearer_token"),
        basic_auth=_basic_auth(reader, data),
        ca_file=_path(reader, data, "ca_file"),
        cert_file=_path(reader, data, "cert_file"),
        key_file=_path(reader, data, "key_file"),
        insecure_skip_verify=reader.typed(
            "alertmanager", data, "insecure_skip_verify", bool, False
        ),
    )


def read_prometheus(reader: TableReader, data: Mapping[str, Any]) -> PrometheusConfig:
    """The `[prometheus]` table, validated."""
    reader.check_keys("prometheus", data, PROMETHEUS_KEYS)
    listen = reader.typed("prometheus", data, "listen", str, None)
    if listen is not None:
        parse_listen(listen, f"{reader.file}:{reader.key_line('prometheus', 'listen')}")
    folder = reader.typed("prometheus", data, "textfile_dir", str, None)
    textfile = (reader.file.parent / Path(folder).expanduser()) if folder else None
    return PrometheusConfig(listen=listen, textfile_dir=textfile)


def _labels(reader: TableReader, data: Mapping[str, Any]) -> dict[str, str]:
    labels = reader.typed("alertmanager", data, "labels", dict, {})
    line = reader.key_line("alertmanager", "labels")
    for name, value in labels.items():
        if not LABEL_NAME.match(name) or name in RESERVED_LABELS:
            raise reader.fail(
                line,
                f"label {name!r} in [alertmanager] labels: names are letters, digits and _ "
                f"(not starting with a digit), and not one logwatch sets ({', '.join(sorted(RESERVED_LABELS))})",
            )
        if not isinstance(value, str):
            raise reader.fail(line, f"label {name!r} in [alertmanager] labels must be a string")
    return dict(labels)


def _secret(reader: TableReader, data: Mapping[str, Any], name: str) -> str | None:
    """A credential from `<name>_env` (a variable's name) or `<name>_file` (its first line)."""
    env_key, file_key = f"{name}_env", f"{name}_file"
    var = reader.typed("alertmanager", data, env_key, str, None)
    value: str | None = None
    if var is not None:
        value = reader.env.get(var) or None
        if value is None:
            raise reader.fail(
                reader.key_line("alertmanager", env_key),
                f"{env_key} names {var!r}, which is not set (export it, or use {file_key})",
            )
    elif (file := reader.typed("alertmanager", data, file_key, str, None)) is not None:
        path = (reader.file.parent / Path(file).expanduser()).resolve()
        try:
            lines = [s.strip() for s in path.read_text(encoding="utf-8").splitlines() if s.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not UTF-8 text"
            raise reader.fail(
                reader.key_line("alertmanager", file_key), f"{file_key} {str(path)!r}: {reason}"
            ) from None
        if not lines:
            raise reader.fail(
                reader.key_line("alertmanager", file_key), f"{file_key} {str(path)!r} is empty"
            )
        value = lines[0]
    if value:
        register_secret(value)
    return value


def _basic_auth(reader: TableReader, data: Mapping[str, Any]) -> tuple[str, str] | None:
    user = reader.typed("alertmanager", data, "basic_auth_username", str, None)
    password = _secret(reader, data, "basic_auth_password")
    if (user is None) != (password is None):
        raise reader.fail(
            reader.header_line("alertmanager"),
            "basic auth needs both basic_auth_username and basic_auth_password_env (or _file)",
        )
    return (user, password) if user is not None and password is not None else None


def _path(reader: TableReader, data: Mapping[str, Any], key: str) -> str | None:
    name = reader.typed("alertmanager", data, key, str, None)
    if name is None:
        return None
    path = (reader.file.parent / Path(name).expanduser()).resolve()
    if not path.is_file():
        raise reader.fail(reader.key_line("alertmanager", key), f"{key} {str(path)!r} not found")
    return str(path)


def with_cluster_options(
    config: ConfigT,
    alertmanager_urls: Sequence[str],
    metrics: str | None,
    textfile_dir: Path | None,
) -> ConfigT:
    """The config with `tail --alertmanager URL...`, `--metrics`, `--metrics-textfile` applied
    (the options win over the tables)."""
    am = config.alertmanager
    if alertmanager_urls:
        am = (am or AlertmanagerConfig(urls=())).with_urls(alertmanager_urls)
    prom = config.prometheus or PrometheusConfig()
    if metrics is not None:
        parse_listen(metrics, "--metrics")
        prom = replace(prom, listen=metrics)
    if textfile_dir is not None:
        prom = replace(prom, textfile_dir=textfile_dir)
    has_prom = prom.listen is not None or prom.textfile_dir is not None
    return replace(config, alertmanager=am, prometheus=prom if has_prom else None)
