"""Every error type logwatch raises to a user: the core raises these, the CLI turns them into
one-line messages (exit code 2)."""


class LogwatchError(Exception):
    """Base of every error logwatch reports to a user (exit code 2 at the CLI)."""


class InputError(LogwatchError):
    """A log file is missing, unreadable or not a file."""


class RulesError(LogwatchError):
    """A rule pack is broken; the message starts with `file:line:`."""


class ConfigError(LogwatchError):
    """The configuration file is broken; the message starts with `file:line:`."""


class RuleTestError(LogwatchError):
    """A `logwatch test` file is broken; the message starts with `file:line:`."""


class SpoolLockedError(LogwatchError):
    """Another logwatch process delivers from this state directory."""


class SilenceError(LogwatchError):
    """A silence command failed (unknown id, broken file)."""


class StateError(LogwatchError):
    """The state directory is in use by another logwatch, or cannot be used."""


class GpuUnavailableError(LogwatchError):
    """`[gpu] mode = "required"` and NVML does not work here."""


class SilencesUnreadable(SilenceError):
    """The silences file cannot be read or parsed; `reason` says why, `stamp` which version."""

    def __init__(self, message: str, reason: str, stamp: tuple[int, int, int] | None) -> None:
        super().__init__(message)
        self.reason, self.stamp = reason, stamp


class ReportError(LogwatchError):
    """A report's extra output cannot be made (no browser for `--png`, a screenshot failed)."""


class ClusterError(LogwatchError):
    """The worker processes or the Dask cluster cannot run the replay (unreachable, no worker,
    a worker without logwatch or with another version, a worker pool that broke)."""
