"""The service's fixes to aiokafka check, when put in place, that aiokafka is the one they were
written for (``bus.aiokafka_internals``): a changed one refuses with one line, the fix not put
in place. Before, a renamed or re-shaped internal left the fix silently gone, or failing inside
aiokafka's background tasks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiokafka
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import client as aiokafka_client
from aiokafka.consumer import fetcher

from blackjack.bus import aiokafka_internals
from blackjack.bus.aiokafka_internals import (
    AiokafkaChanged,
    require_bootstrap,
    require_fetch_reader,
    require_metadata_update,
    require_topic_ids,
    with_globals,
)
from blackjack.bus.clients import ScopedConsumer, ScopedProducer
from blackjack.bus.cut_short import close_clients_cut_short
from blackjack.bus.header_names import read_header_names_not_utf8
from blackjack.bus.metadata_backoff import back_off_failed_metadata_updates


def test_the_installed_aiokafka_is_the_one_the_fixes_were_written_for() -> None:
    require_metadata_update()
    require_bootstrap()
    require_fetch_reader()


class Client(aiokafka_client.AIOKafkaClient):  # type: ignore[misc]
    """aiokafka's client, as a release might change it."""


def changed(name: str, function: Any) -> type:
    return type("Client", (Client,), {name: function})


async def renamed_arguments(self: Any, metadata: Any, topics: Any) -> bool:
    return True


def not_a_coroutine(self: Any, cluster_metadata: Any, topics: Any) -> bool:
    return True


async def bootstrap_elsewhere(self: Any) -> None:
    """connects through another helper"""


@pytest.mark.parametrize(
    ("client_class", "said"),
    [
        (changed("_metadata_update", renamed_arguments), r"takes \(self, metadata, topics\)"),
        (changed("_metadata_update", not_a_coroutine), "no longer a coroutine function"),
        (changed("_metadata_update", None), "no longer a coroutine function"),
        (
            changed("_md_synchronizer", bootstrap_elsewhere),
            "_md_synchronizer no longer uses _metadata_update",
        ),
    ],
)
def test_a_changed_metadata_update_refuses(client_class: type, said: str) -> None:
    with pytest.raises(AiokafkaChanged, match=said) as refused:
        require_metadata_update(client_class)
    assert "\n" not in str(refused.value)
    assert str(refused.value).startswith(f"aiokafka {aiokafka.__version__}: ")


def test_a_changed_bootstrap_refuses() -> None:
    with pytest.raises(AiokafkaChanged, match="bootstrap no longer uses create_conn, _conns"):
        require_bootstrap(changed("bootstrap", bootstrap_elsewhere))


def test_a_changed_fetcher_refuses() -> None:
    class Fetcher(fetcher.Fetcher):  # type: ignore[misc]
        async def _proc_fetch_request(self, assignment: Any, node_id: Any, request: Any) -> Any:
            return None  # reads its batches some other way

    with pytest.raises(AiokafkaChanged, match="_proc_fetch_request no longer uses MemoryRecords"):
        require_fetch_reader(Fetcher)

    class Consumer(AIOKafkaConsumer):  # type: ignore[misc]
        async def start(self) -> None:
            """makes its fetcher elsewhere"""

    with pytest.raises(AiokafkaChanged, match="start no longer uses _fetcher, Fetcher"):
        require_fetch_reader(consumer_class=Consumer)


def test_the_topic_id_request_checks_what_it_sends_through() -> None:
    require_topic_ids()  # the installed one
    with pytest.raises(AiokafkaChanged, match=r"AIOKafkaClient.send takes \(self, metadata"):
        require_topic_ids(changed("send", renamed_arguments))

    class Consumer(AIOKafkaConsumer):  # type: ignore[misc]
        def __init__(self) -> None:
            """keeps its client under another name"""

    with pytest.raises(AiokafkaChanged, match="__init__ no longer uses _client"):
        require_topic_ids(consumer_class=Consumer)


def test_another_release_refuses_and_no_fix_is_put_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(aiokafka, "__version__", "0.15.0")
    update = vars(aiokafka_client.AIOKafkaClient)["_metadata_update"]
    bootstrap = vars(aiokafka_client.AIOKafkaClient)["bootstrap"]
    records = fetcher.MemoryRecords
    for install in (
        back_off_failed_metadata_updates,
        close_clients_cut_short,
        read_header_names_not_utf8,
    ):
        with pytest.raises(AiokafkaChanged, match=r"aiokafka 0\.15\.0: not a release"):
            install()
    for scoped in (ScopedProducer, ScopedConsumer):
        with pytest.raises(AiokafkaChanged):
            scoped(bootstrap_servers="127.0.0.1:1")
    assert vars(aiokafka_client.AIOKafkaClient)["_metadata_update"] is update
    assert vars(aiokafka_client.AIOKafkaClient)["bootstrap"] is bootstrap
    assert fetcher.MemoryRecords is records


def test_a_process_refuses_to_start_with_one_line(tmp_path: Path) -> None:
    """``blackjack projections run`` on another aiokafka release: one line, exit 2, before it
    touches its database."""
    changed = (
        "import sys, aiokafka; aiokafka.__version__ = '0.15.0'; from blackjack.cli import main; "
    )
    db = tmp_path / "read.db"
    env = {**os.environ, "BLACKJACK_DB_URL": f"sqlite+aiosqlite:///{db}"}
    done = subprocess.run(
        [sys.executable, "-c", changed + "sys.exit(main(['projections', 'run']))"],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = done.stderr.splitlines()
    assert done.returncode == 2 and len(said) == 1, done.stderr[-2000:]
    assert said[0].startswith("blackjack: aiokafka 0.15.0: not a release"), said
    assert not db.exists()


def test_with_globals_binds_the_names_for_that_function_alone() -> None:
    def reader() -> Any:
        return fetcher.MemoryRecords

    bound = with_globals(aiokafka_internals.PROC_FETCH_REQUEST, MemoryRecords="mine")
    assert bound.__globals__["MemoryRecords"] == "mine"
    assert fetcher.MemoryRecords is not "mine"  # noqa: F632
    assert bound.__code__ is aiokafka_internals.PROC_FETCH_REQUEST.__code__
    assert reader() is fetcher.MemoryRecords
