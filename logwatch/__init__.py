"""logwatch: watch ML training runs through their logs and GPUs."""

__version__ = "0.1.0"
