"""Which side ``cannot_reach`` names (a diff review: a TLS error, a timeout and a full disk
all named the live store, and a corrupt Kafka record became a setting's exit 2)."""

from __future__ import annotations

import errno
import sqlite3
import ssl

import pytest
from aiokafka.errors import CorruptRecordException, KafkaConnectionError
from sqlalchemy import exc as sql_errors

from blackjack.cannot_reach import cannot_reach

STORES = ("postgresql+asyncpg://u:***@live-db/blackjack", "the audit's scratch store")


def said(error: BaseException) -> str | None:
    return cannot_reach(error, bootstrap="kafka:9093", stores=STORES)


def test_the_brokers_not_reached_are_named_as_kafka() -> None:
    line = said(KafkaConnectionError("Unable to bootstrap from kafka:9093"))
    assert line is not None and line.startswith("Kafka at kafka:9093: KafkaConnectionError")
    assert "live-db" not in line


def test_a_database_that_cannot_serve_is_named_with_every_store_it_may_be() -> None:
    full = sql_errors.OperationalError(
        "INSERT ...", {}, sqlite3.OperationalError("database or disk is full")
    )
    line = said(full)
    assert line is not None and line.startswith(f"the store {STORES[0]} or {STORES[1]} cannot")
    assert "Kafka" not in line and "\n" not in line


@pytest.mark.parametrize(
    "error",
    [
        ssl.SSLCertVerificationError("certificate verify failed"),
        TimeoutError(),
        ConnectionRefusedError(),
    ],
)
def test_a_bare_connection_error_names_both_sides(error: BaseException) -> None:
    line = said(error)
    assert line is not None and line.startswith("Kafka at kafka:9093, or the store ")


@pytest.mark.parametrize(
    "error", [CorruptRecordException("crc"), OSError(errno.ENOSPC, "No space left on device")]
)
def test_what_is_not_a_connection_is_left_to_raise(error: BaseException) -> None:
    assert said(error) is None
