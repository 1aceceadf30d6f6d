"""Alertmanager: alert events to every HA peer as API v2 alerts."""
