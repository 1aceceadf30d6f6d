"""Typed errors: the core raises these, the CLI turns them into one-line messages."""


class LogwatchError(Exception):
    """Base of every error logwatch reports to a user (exit code 2 at the CLI)."""


class InputError(LogwatchError):
    """A log file is missing, unreadable or not a file."""


class RulesError(LogwatchError):
    """A rule pack is broken; the message starts with `file:line:`."""


class ConfigError(LogwatchError):
    """The configuration file is broken; the message starts with `file:line:`."""
