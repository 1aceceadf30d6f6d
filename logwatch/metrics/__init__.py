"""Prometheus metrics: the exporter tail plugin, its series, the OpenMetrics export of replay."""
