"""Kafka plumbing shared by the service's parts: settings, topic names and their creation."""
