"""Replay and audit: the event log checked against the rules and against the read model.

``replay`` folds a table's events with the pure engine and checks every one of them,
``recall`` tells one round readably (``blackjack replay``), ``audit`` compares the live read
model with a rebuild from offset 0 and checks money conservation (``blackjack audit``).
"""
