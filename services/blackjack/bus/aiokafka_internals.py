"""What the service's fixes to aiokafka rely on inside it, checked before any is put in place.

Three fixes reach into aiokafka's internals (``bus.metadata_backoff``, ``bus.cut_short``,
``bus.header_names``). Written against aiokafka 0.14.0, they would go wrong quietly on an
aiokafka that changed them: a wrapped method renamed is never called (the fix is gone, no
error), one whose arguments changed fails inside a background task. So each fix checks, when
it is put in place, the version it was written for and the shape of every internal it uses
(``require_*`` below); one that does not hold raises ``AiokafkaChanged``, a
``ConfigurationError``: the process refuses to start with one line naming what changed
(``blackjack: aiokafka 0.15.0: ...``, exit 2), and ``BlackjackClient.start`` raises it.

The functions the fixes wrap are taken here, at import, from the classes as aiokafka ships
them, before any fix replaces one, so that a fix scoped to one client never wraps another's.
``with_globals`` runs one of them with some of its module's names bound otherwise (the record
reader of one consumer's fetcher, the connections one client's bootstrap opens), without
changing the module for anyone else.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

import aiokafka
from aiokafka import AIOKafkaConsumer
from aiokafka import client as aiokafka_client
from aiokafka.consumer import fetcher

from blackjack.configuration import ConfigurationError

TESTED_VERSIONS = ("0.14.",)
"""The aiokafka releases (version prefixes) the fixes were written and tested against."""


class AiokafkaChanged(ConfigurationError):
    """The installed aiokafka is not the one the service's fixes to it were written for."""


_SHIPPED: dict[type, dict[str, Any]] = {
    cls: dict(vars(cls))
    for cls in (aiokafka_client.AIOKafkaClient, fetcher.Fetcher, AIOKafkaConsumer)
}
"""aiokafka's classes as it ships them (taken at import, before any fix of the process)"""


def _own(cls: type, name: str) -> Any:
    """``cls``'s own ``name``; of an aiokafka class, as aiokafka ships it (a fix put in place,
    or a test's counter, is not what is checked)."""
    shipped = _SHIPPED.get(cls)
    return getattr(cls, name, None) if shipped is None else shipped.get(name)


METADATA_UPDATE: Any = _own(aiokafka_client.AIOKafkaClient, "_metadata_update")
BOOTSTRAP: Any = _own(aiokafka_client.AIOKafkaClient, "bootstrap")
PROC_FETCH_REQUEST: Any = _own(fetcher.Fetcher, "_proc_fetch_request")
"""aiokafka's own, taken before any fix of this process replaced one"""


def _refuse(what: str, version: str) -> AiokafkaChanged:
    return AiokafkaChanged(
        f"aiokafka {version}: {what}; the service's fixes to aiokafka's internals "
        f"(blackjack.bus.aiokafka_internals) were written for aiokafka "
        f"{', '.join(v + 'x' for v in TESTED_VERSIONS)}: install that, or review the fixes "
        "for this release (docs/kafka.md, 'aiokafka changed')"
    )


def require_version(version: str | None = None) -> str:
    """The installed aiokafka's version (or ``version``), if the fixes were tested with it."""
    version = aiokafka.__version__ if version is None else version
    if not version.startswith(TESTED_VERSIONS):
        raise _refuse("not a release the fixes were tested with", version)
    return version


def _coroutine(function: Any, where: str, parameters: list[str], version: str) -> None:
    if not inspect.iscoroutinefunction(function):
        raise _refuse(f"{where} is no longer a coroutine function", version)
    found = list(inspect.signature(function).parameters)
    if found != parameters:
        raise _refuse(f"{where} takes ({', '.join(found)}), not ({', '.join(parameters)})", version)


def _uses(function: Any, names: tuple[str, ...], where: str, version: str) -> None:
    code = getattr(function, "__code__", None)
    used = set() if code is None else set(code.co_names)
    missing = [name for name in names if name not in used]
    if missing:
        raise _refuse(f"{where} no longer uses {', '.join(missing)}", version)


def require_metadata_update(
    client_class: type = aiokafka_client.AIOKafkaClient, version: str | None = None
) -> None:
    """``bus.metadata_backoff``: ``AIOKafkaClient._metadata_update(self, cluster_metadata,
    topics)``, a coroutine, is what the client's metadata task awaits, and the client keeps its
    ``retry_backoff_ms`` as ``_retry_backoff`` (seconds)."""
    version = require_version(version)
    update = _own(client_class, "_metadata_update")
    _coroutine(
        update, "AIOKafkaClient._metadata_update", ["self", "cluster_metadata", "topics"], version
    )
    _uses(
        _own(client_class, "_md_synchronizer"),
        ("_metadata_update",),
        "AIOKafkaClient._md_synchronizer",
        version,
    )
    _uses(_own(client_class, "__init__"), ("_retry_backoff",), "AIOKafkaClient.__init__", version)


def require_bootstrap(
    client_class: type = aiokafka_client.AIOKafkaClient,
    client_module: types.ModuleType = aiokafka_client,
    version: str | None = None,
) -> None:
    """``bus.cut_short``: ``AIOKafkaClient.bootstrap(self)``, a coroutine without closure,
    opens its connections by its module's ``create_conn`` and keeps those it keeps in
    ``_conns``."""
    version = require_version(version)
    bootstrap = _own(client_class, "bootstrap")
    _coroutine(bootstrap, "AIOKafkaClient.bootstrap", ["self"], version)
    _uses(bootstrap, ("create_conn", "_conns"), "AIOKafkaClient.bootstrap", version)
    if bootstrap.__code__.co_freevars:
        raise _refuse("AIOKafkaClient.bootstrap has a closure", version)
    if not callable(getattr(client_module, "create_conn", None)):
        raise _refuse("aiokafka.client has no create_conn", version)


def require_fetch_reader(
    fetcher_class: type = fetcher.Fetcher,
    fetcher_module: types.ModuleType = fetcher,
    consumer_class: type = AIOKafkaConsumer,
    version: str | None = None,
) -> None:
    """``bus.header_names``: the fetcher makes each fetch's reader of record batches by its
    module's name ``MemoryRecords`` in ``Fetcher._proc_fetch_request`` (a coroutine without
    closure), reads them by ``has_next`` and ``next_batch`` (``PartitionRecords``), and the
    consumer makes its fetcher in ``start`` as ``self._fetcher``."""
    version = require_version(version)
    proc = _own(fetcher_class, "_proc_fetch_request")
    where = "Fetcher._proc_fetch_request"
    _coroutine(proc, where, ["self", "assignment", "node_id", "request"], version)
    _uses(proc, ("MemoryRecords",), where, version)
    if proc.__code__.co_freevars:
        raise _refuse(f"{where} has a closure", version)
    if getattr(fetcher_module, "MemoryRecords", None) is None:
        raise _refuse("aiokafka.consumer.fetcher has no MemoryRecords", version)
    records = getattr(fetcher_module, "PartitionRecords", None)
    _uses(
        getattr(records, "_unpack_records", None),
        ("has_next", "next_batch"),
        "PartitionRecords._unpack_records",
        version,
    )
    _uses(_own(consumer_class, "start"), ("_fetcher", "Fetcher"), "AIOKafkaConsumer.start", version)


def require_topic_ids(
    client_class: type = aiokafka_client.AIOKafkaClient,
    consumer_class: type = AIOKafkaConsumer,
    version: str | None = None,
) -> None:
    """``bus.topic_ids``: a consumer keeps its ``AIOKafkaClient`` as ``_client``, whose
    ``send(self, node_id, request, *, group)`` (a coroutine) sends a request built from
    aiokafka's ``Request`` (its version negotiated per connection) to the node
    ``get_random_node`` names, or a partition's leader in its ``cluster``'s metadata
    (``leader_for_partition``)."""
    version = require_version(version)
    _coroutine(
        _own(client_class, "send"),
        "AIOKafkaClient.send",
        ["self", "node_id", "request", "group"],
        version,
    )
    if not callable(_own(client_class, "get_random_node")):
        raise _refuse("AIOKafkaClient has no get_random_node", version)
    _uses(_own(client_class, "__init__"), ("cluster",), "AIOKafkaClient.__init__", version)
    if not callable(getattr(aiokafka_client.ClusterMetadata, "leader_for_partition", None)):
        raise _refuse("ClusterMetadata has no leader_for_partition", version)
    _uses(_own(consumer_class, "__init__"), ("_client",), "AIOKafkaConsumer.__init__", version)


def with_globals(function: Callable[..., Any], **names: Any) -> Callable[..., Any]:
    """``function`` (aiokafka's own code, unchanged) with ``names`` of its module bound
    otherwise, for it alone: its module, and every other caller, see theirs as before."""
    bound = types.FunctionType(
        function.__code__,
        {**function.__globals__, **names},
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    bound.__kwdefaults__ = function.__kwdefaults__
    bound.__qualname__ = function.__qualname__
    bound.__module__ = function.__module__
    return bound
