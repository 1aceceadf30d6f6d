"""The config file (`logwatch.toml`): Slack, Alertmanager, Prometheus, rule overrides, alert
lifecycle, GPU; `file:line:` errors."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logwatch.buttons_config import BUTTON_KEYS, ButtonsConfig, read_buttons
from logwatch.errors import ConfigError
from logwatch.gpu.mode import GpuMode
from logwatch.redact import register_secret, stderr_line
from logwatch.rules.loader import Overrides, RuleSpec, builtin_rules_dir, load_rules
from logwatch.rules.params import ParamError
from logwatch.rules.registry import duration_params
from logwatch.statekey import default_state_dir as default_state_dir  # re-exported: its old home
from logwatch.tablereader import TableReader, show
from logwatch.words import counted

if TYPE_CHECKING:  # read only from a config file that has the tables (_Reader.read)
    from logwatch.actions.spec import ActionSpec
    from logwatch.cluster_config import AlertmanagerConfig, PrometheusConfig
    from logwatch.webhook_config import WebhookConfig

DEFAULT_CONFIG = Path("logwatch.toml")
SLACK_API = "https://slack.com/api/"
DEFAULT_INHIBIT = (("nvml-disabled", "gpu-metrics-missing"),)
_TOP_KEYS = {"slack", "alertmanager", "prometheus", "rules", "alerts", "gpu"} | {
    "rule_packs",
    "builtin_rules",
    "action",
    "webhook",
}
_SLACK_KEYS = {"channel", "base_url", "token_file", "webhook_url_env", "timeout", "pace"}
_SLACK_KEYS |= BUTTON_KEYS
_ALERT_KEYS = {"group_wait", "repeat_interval", "inhibit", "notify_on_resolve"}
_GPU_KEYS = {"mode", "interval", "notify_unavailable", "export"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class SlackConfig:
    """Where and how alerts reach Slack. Secrets are kept out of repr."""

    channel: str
    base_url: str
    timeout_s: float = 10.0
    pace_s: float = 1.0  # at most one request per channel per pace (Slack allows about 1/s)
    token: str | None = field(default=None, repr=False)
    webhook_url: str | None = field(default=None, repr=False)
    buttons: ButtonsConfig | None = None  # [slack] app_token_file: buttons over Socket Mode

    @property
    def mode(self) -> str:
        """`webhook` when a webhook URL is set, else `bot`."""
        return "webhook" if self.webhook_url else "bot"


@dataclass(frozen=True, slots=True)
class AlertsConfig:
    """Lifecycle settings: grouping window, repeat interval, inhibition pairs (source, target)."""

    group_wait_s: float = 10.0
    repeat_interval_s: float = 3600.0
    inhibit: tuple[tuple[str, str], ...] = DEFAULT_INHIBIT
    notify_on_resolve: bool = False  # the resolve's thread reply broadcast to the channel (a ping)


@dataclass(frozen=True, slots=True)
class GpuConfig:
    """GPU telemetry settings, read by the NVML feature."""

    mode: GpuMode = GpuMode.AUTO
    interval_s: float = 5.0
    notify_unavailable: bool = False  # `logwatch-gpu-unavailable` to Slack too, not only stdout
    export: bool = True  # GPU series in /metrics (false where dcgm-exporter runs)


@dataclass(frozen=True, slots=True)
class Config:
    """Everything the config file says, validated."""

    path: Path | None = None
    slack: SlackConfig | None = None
    alertmanager: AlertmanagerConfig | None = None
    prometheus: PrometheusConfig | None = None
    alerts: AlertsConfig = AlertsConfig()
    gpu: GpuConfig = GpuConfig()
    rule_packs: tuple[Path, ...] = ()
    builtin_rules: bool = True
    rule_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    override_lines: Mapping[str, int] = field(default_factory=dict)
    key_lines: Mapping[str, int] = field(default_factory=dict)
    actions: tuple[ActionSpec, ...] = ()  # the [[action]] tables
    webhooks: tuple[WebhookConfig, ...] = ()  # the [[webhook]] tables

    @property
    def sink_tables(self) -> frozenset[str]:
        """The sink tables this config has ([slack], ...): what `sinks.registry` opens."""
        # a new sink: its table's field here, its parser below
        tables = {
            "slack": self.slack,
            "alertmanager": self.alertmanager,
            "webhook": self.webhooks or None,
        }
        return frozenset(name for name, table in tables.items() if table is not None)

    def where(self, rule_id: str, key: str | None = None) -> str:
        """`file:line` of a rule's override table (or of one key in it)."""
        line = self.override_lines.get(f"{rule_id}.{key}") or self.override_lines.get(rule_id, 1)
        return f"{self.path}:{line}"


def config_rules(config: Config, extra: Sequence[str | Path] = ()) -> list[RuleSpec]:
    """The rule packs the config names (built-ins first), with its `[rules.<id>]` overrides."""
    paths = [builtin_rules_dir()] if config.builtin_rules else []
    paths += [*config.rule_packs, *(Path(p) for p in extra)]
    overrides = Overrides(config.rule_overrides, config.where) if config.rule_overrides else None
    return _check_actions(config, _check_inhibit(config, load_rules(paths, overrides)))


def _check_actions(config: Config, specs: list[RuleSpec]) -> list[RuleSpec]:
    """An [[action]] `on` naming a rule that is not loaded would never run: refuse it."""
    known = {spec.id for spec in specs}
    for action in config.actions:
        unknown = [rule for rule in action.on if rule != "*" and rule not in known]
        if unknown:
            raise ConfigError(
                f"{config.path}:{action.line}: [[action]] {action.name}: 'on' names unknown rule "
                f"{unknown[0]!r} (loaded rules: {', '.join(sorted(known)) or 'none'}; "
                '"*" for every rule)'
            )
    return specs


def _check_inhibit(config: Config, specs: list[RuleSpec]) -> list[RuleSpec]:
    """An [alerts] inhibit pair naming a rule that is not loaded would never apply: refuse it."""
    line = config.key_lines.get("alerts.inhibit")
    if line is None:
        return specs
    known = {spec.id for spec in specs}
    for pair in config.alerts.inhibit:
        for rule_id in pair:
            if rule_id not in known:
                raise ConfigError(
                    f"{config.path}:{line}: [alerts] inhibit names unknown rule {rule_id!r} "
                    f"(loaded rules: {', '.join(sorted(known)) or 'none'})"
                )
    return specs


def find_config(path: str | None, env: Mapping[str, str] | None = None) -> Path | None:
    """The config to read: the given path, else $LOGWATCH_CONFIG, else ./logwatch.toml, else
    $XDG_CONFIG_HOME/logwatch/config.toml (~/.config by default) when present, else none."""
    env = os.environ if env is None else env
    if path is not None:
        return Path(path)
    if env.get("LOGWATCH_CONFIG"):
        return Path(env["LOGWATCH_CONFIG"])  # named explicitly: a missing one is an error
    if DEFAULT_CONFIG.is_file():
        return DEFAULT_CONFIG
    user = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "logwatch" / "config.toml"
    return user if user.is_file() else None


def load_config(path: str | Path | None, env: Mapping[str, str] | None = None) -> Config:
    """Read and validate a config file; no path means defaults (and no Slack)."""
    if path is None:
        return Config()
    env = os.environ if env is None else env
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{file}:1: cannot read config: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{file}:1: config is not valid UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise ConfigError(
            f"{file}:{match.group(1) if match else 1}: invalid TOML: {reason}"
        ) from None
    return _Reader(file, text, env).read(data)


class _Reader(TableReader):
    """Validates the parsed TOML, turning each problem into `file:line: what is wrong`."""

    def read(self, data: Mapping[str, Any]) -> Config:
        self.check_keys(None, data, _TOP_KEYS)
        packs = self.typed(None, data, "rule_packs", list, [])
        for item in packs:
            if not isinstance(item, str):
                raise self.fail(
                    self.key_line(None, "rule_packs"),
                    f"'rule_packs' must be a list of paths (strings), got {show(item)}",
                )
        for item in packs:
            if not (self.file.parent / item).exists():
                raise self.fail(
                    self.key_line(None, "rule_packs"),
                    f"rule pack {item!r} not found (looked for {self.file.parent / item}; "
                    "paths are relative to the config file)",
                )
        # Here, not at the top: `replay` reads a config but never these tables, and does not
        # pay for the module (tests/test_cli_startup.py). The import goes one way only.
        from logwatch.cluster_config import read_alertmanager, read_prometheus

        overrides, lines = self.rules(self.table(data, "rules"))
        alerts = self.table(data, "alerts")
        key_lines = (
            {"alerts.inhibit": self.key_line("alerts", "inhibit")} if "inhibit" in alerts else {}
        )
        return Config(
            path=self.file,
            slack=self.slack(self.table(data, "slack")) if "slack" in data else None,
            alertmanager=read_alertmanager(self, self.table(data, "alertmanager"))
            if "alertmanager" in data
            else None,
            prometheus=read_prometheus(self, self.table(data, "prometheus"))
            if "prometheus" in data
            else None,
            alerts=self.alerts(alerts),
            gpu=self.gpu(self.table(data, "gpu")),
            rule_packs=tuple((self.file.parent / p) for p in packs),
            builtin_rules=self.typed(None, data, "builtin_rules", bool, True),
            rule_overrides=overrides,
            override_lines=lines,
            key_lines=key_lines,
            actions=self.actions(data["action"]) if "action" in data else (),
            webhooks=self.webhooks(data["webhook"]) if "webhook" in data else (),
        )

    def webhooks(self, items: Any) -> tuple[WebhookConfig, ...]:
        from logwatch.webhook_config import read_webhooks  # only when configured

        return read_webhooks(self, items)

    def actions(self, items: Any) -> tuple[ActionSpec, ...]:
        from logwatch.actions.spec import read_actions  # only for a config that has them

        return read_actions(self, items)

    def slack(self, data: Mapping[str, Any]) -> SlackConfig:
        self.check_keys("slack", data, _SLACK_KEYS)
        base_url = self.env.get("LOGWATCH_SLACK_BASE_URL") or self.typed(
            "slack", data, "base_url", str, SLACK_API
        )
        hook_env = self.typed("slack", data, "webhook_url_env", str, "SLACK_WEBHOOK_URL")
        if not _ENV_NAME.match(hook_env):
            # Never echo the value: it is most likely the webhook URL itself.
            raise self.fail(
                self.key_line("slack", "webhook_url_env"),
                "'webhook_url_env' must name an environment variable (letters, digits, _), "
                "e.g. SLACK_WEBHOOK_URL; put the webhook URL in that variable, not in the config",
            )
        webhook = self.env.get(hook_env) or None
        token = self.env.get("SLACK_BOT_TOKEN") or self.token_file(data)
        for secret in (webhook, token):
            if secret:
                register_secret(secret)
        channel = self.typed("slack", data, "channel", str, "")
        at = self.header_line("slack")
        if not webhook and not token:
            raise self.fail(
                at,
                f"[slack] is configured but there is no token: set SLACK_BOT_TOKEN or [slack] token_file (bot mode), or {hook_env} (webhook mode)",
            )
        if not webhook and not channel:
            raise self.fail(
                at, "[slack] needs 'channel' (a channel ID such as C0123456789) in bot mode"
            )
        buttons = read_buttons(self, data)
        if buttons is not None and webhook:
            raise self.fail(
                self.key_line("slack", "app_token_file"),
                "the alert buttons edit and answer messages, which an incoming webhook cannot: "
                "use a bot token (SLACK_BOT_TOKEN or [slack] token_file) with app_token_file",
            )
        return SlackConfig(
            buttons=buttons,
            channel=channel or "webhook",
            base_url=base_url if base_url.endswith("/") else base_url + "/",
            timeout_s=self.duration("slack", data, "timeout", 10.0),
            pace_s=self.duration("slack", data, "pace", 1.0),
            token=token,
            webhook_url=webhook,
        )

    def token_file(self, data: Mapping[str, Any]) -> str | None:
        name = self.typed("slack", data, "token_file", str, None)
        if name is None:
            return None
        path = (self.file.parent / Path(name).expanduser()).resolve()
        try:
            lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not UTF-8 text"
            raise self.fail(
                self.key_line("slack", "token_file"),
                f"token_file {str(path)!r}: cannot read: {reason}",
            ) from None
        lines = [line for line in lines if line]
        if not lines:
            raise self.fail(
                self.key_line("slack", "token_file"),
                f"token_file {str(path)!r} is empty (put the bot token, xoxb-..., in it)",
            )
        # The token is the first line, exactly what is sent and registered as a secret: the
        # whole file, sent, put its second line in the error of every retry (an invalid header).
        if len(lines) > 1:
            stderr_line(
                f"logwatch: token_file {path}: {counted(len(lines), 'line')}; using the first"
            )
        return lines[0]

    def alerts(self, data: Mapping[str, Any]) -> AlertsConfig:
        self.check_keys("alerts", data, _ALERT_KEYS)
        pairs = self.typed("alerts", data, "inhibit", list, None)
        inhibit: tuple[tuple[str, str], ...] = DEFAULT_INHIBIT
        if pairs is not None:
            bad = [
                p
                for p in pairs
                if not (isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p))
            ]
            if bad:
                raise self.fail(
                    self.key_line("alerts", "inhibit"),
                    f"'inhibit' must be a list of [source-rule, target-rule] pairs, got {show(bad[0])}",
                )
            inhibit = tuple((p[0], p[1]) for p in pairs)
        group_wait = self.duration("alerts", data, "group_wait", 10.0)
        if group_wait < 0:
            raise self.fail(
                self.key_line("alerts", "group_wait"), "'group_wait' must be 0s or more"
            )
        repeat = self.duration("alerts", data, "repeat_interval", 3600.0)
        if repeat <= 0:
            raise self.fail(
                self.key_line("alerts", "repeat_interval"), "'repeat_interval' must be more than 0s"
            )
        notify = self.typed("alerts", data, "notify_on_resolve", bool, False)
        return AlertsConfig(
            group_wait_s=group_wait,
            repeat_interval_s=repeat,
            inhibit=inhibit,
            notify_on_resolve=notify,
        )

    def gpu(self, data: Mapping[str, Any]) -> GpuConfig:
        self.check_keys("gpu", data, _GPU_KEYS)
        mode = self.typed("gpu", data, "mode", str, "auto")
        if mode not in set(GpuMode):
            raise self.fail(
                self.key_line("gpu", "mode"),
                f"'mode' must be one of {', '.join(GpuMode)}, got {mode!r}",
            )
        interval = self.duration("gpu", data, "interval", 5.0)
        if interval <= 0:
            raise self.fail(self.key_line("gpu", "interval"), "'interval' must be more than 0s")
        notify = self.typed("gpu", data, "notify_unavailable", bool, False)
        export = self.typed("gpu", data, "export", bool, True)
        return GpuConfig(
            mode=GpuMode(mode), interval_s=interval, notify_unavailable=notify, export=export
        )

    def rules(self, data: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
        """The `[rules.<id>]` tables, checked as far as they can be without the rule packs (the
        loader checks the rest against each rule's type)."""
        durations = duration_params()
        overrides: dict[str, dict[str, Any]] = {}
        lines: dict[str, int] = {}
        for rule_id, table in data.items():
            name = f"rules.{rule_id}"
            if not isinstance(table, dict):
                raise self.fail(
                    self.key_line("rules", rule_id),
                    f"rules.{rule_id} must be a table ([rules.{rule_id}])",
                )
            for key, value in table.items():
                if key == "enabled" and not isinstance(value, bool):
                    raise self.fail(
                        self.key_line(name, key),
                        f"'enabled' must be true or false, got {show(value)}",
                    )
                if isinstance(value, str) and key in durations:
                    # A duration is parsed here already, as the config's own durations are.
                    try:
                        durations[key].validate(value)
                    except ParamError as exc:
                        raise self.fail(
                            self.key_line(name, key), f"{key!r}: {exc.reason}"
                        ) from None
            overrides[rule_id] = dict(table)
            lines[rule_id] = self.header_line(name)
            lines.update({f"{rule_id}.{key}": self.key_line(name, key) for key in table})
        return overrides, lines
