"""Metrics (Prometheus) and logs (structlog, JSON) of the service."""
