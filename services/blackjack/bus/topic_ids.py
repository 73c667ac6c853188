"""A topic's id and partitions as the broker has them now: a topic deleted and made again
under the same name is told by its id.

aiokafka 0.14 asks the broker for metadata in versions 0 to 5, which carry no topic id
(ids came with Metadata v10, Kafka 2.8, KIP-516), and its ``ClusterMetadata`` keeps none: a
consumer of a topic deleted and recreated reads the new one on from the old one's positions,
over the records before them, unless a position happens to be out of range. So this module
asks for it in the versions that carry it (v10 to v12, the flexible encoding aiokafka's
protocol types already have), through an aiokafka client's own connections
(``AIOKafkaClient.send``: the version is the highest both sides know, negotiated per
connection as for every request of aiokafka's). A broker older than 2.8 has no id to give:
``TopicIdsUnsupported``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from io import BytesIO
from typing import Any

from aiokafka.client import ConnectionGroup
from aiokafka.errors import (
    IncompatibleBrokerVersion,
    NodeNotReadyError,
    UnknownTopicOrPartitionError,
    for_code,
)
from aiokafka.protocol.abstract import AbstractType
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

METADATA_KEY = 3


class TopicIdsUnsupported(Exception):
    """The broker answers no Metadata request that carries topic ids (older than Kafka 2.8)."""


class _Uuid(AbstractType[uuid.UUID]):  # type: ignore[misc]
    """Kafka's UUID: 16 bytes, big-endian (all zero: none)."""

    @classmethod
    def encode(cls, value: uuid.UUID) -> bytes:
        return value.bytes

    @classmethod
    def decode(cls, data: BytesIO) -> uuid.UUID:
        raw = data.read(16)
        if len(raw) != 16:
            raise ValueError("Buffer underrun decoding a UUID")
        return uuid.UUID(bytes=raw)


_BROKERS = (
    "brokers",
    CompactArray(
        ("node_id", Int32),
        ("host", CompactString("utf-8")),
        ("port", Int32),
        ("rack", CompactString("utf-8")),
        ("tags", TaggedFields),
    ),
)
_PARTITIONS = (
    "partitions",
    CompactArray(
        ("error_code", Int16),
        ("partition_index", Int32),
        ("leader_id", Int32),
        ("leader_epoch", Int32),
        ("replica_nodes", CompactArray(Int32)),
        ("isr_nodes", CompactArray(Int32)),
        ("offline_replicas", CompactArray(Int32)),
        ("tags", TaggedFields),
    ),
)
_TOPICS = (
    "topics",
    CompactArray(
        ("error_code", Int16),
        ("name", CompactString("utf-8")),
        ("topic_id", _Uuid),
        ("is_internal", Boolean),
        _PARTITIONS,
        ("topic_authorized_operations", Int32),
        ("tags", TaggedFields),
    ),
)


class MetadataResponse_v10(Response):  # type: ignore[misc]  # noqa: N801
    API_KEY = METADATA_KEY
    API_VERSION = 10
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        _BROKERS,
        ("cluster_id", CompactString("utf-8")),
        ("controller_id", Int32),
        _TOPICS,
        ("cluster_authorized_operations", Int32),
        ("tags", TaggedFields),
    )


class MetadataResponse_v11(Response):  # type: ignore[misc]  # noqa: N801
    API_KEY = METADATA_KEY
    API_VERSION = 11
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        _BROKERS,
        ("cluster_id", CompactString("utf-8")),
        ("controller_id", Int32),
        _TOPICS,
        ("tags", TaggedFields),
    )


class MetadataResponse_v12(Response):  # type: ignore[misc]  # noqa: N801
    API_KEY = METADATA_KEY
    API_VERSION = 12
    SCHEMA = MetadataResponse_v11.SCHEMA


_REQUESTED_TOPICS = (
    "topics",
    CompactArray(("topic_id", _Uuid), ("name", CompactString("utf-8")), ("tags", TaggedFields)),
)


class MetadataRequest_v10(RequestStruct):  # type: ignore[misc]  # noqa: N801
    FLEXIBLE_VERSION = True
    API_KEY = METADATA_KEY
    API_VERSION = 10
    RESPONSE_TYPE = MetadataResponse_v10
    SCHEMA = Schema(
        _REQUESTED_TOPICS,
        ("allow_auto_topic_creation", Boolean),
        ("include_cluster_authorized_operations", Boolean),
        ("include_topic_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


class MetadataRequest_v11(RequestStruct):  # type: ignore[misc]  # noqa: N801
    FLEXIBLE_VERSION = True
    API_KEY = METADATA_KEY
    API_VERSION = 11
    RESPONSE_TYPE = MetadataResponse_v11
    SCHEMA = Schema(
        _REQUESTED_TOPICS,
        ("allow_auto_topic_creation", Boolean),
        ("include_topic_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


class MetadataRequest_v12(RequestStruct):  # type: ignore[misc]  # noqa: N801
    FLEXIBLE_VERSION = True
    API_KEY = METADATA_KEY
    API_VERSION = 12
    RESPONSE_TYPE = MetadataResponse_v12
    SCHEMA = MetadataRequest_v11.SCHEMA


_NO_ID = uuid.UUID(int=0)


_Versions = MetadataRequest_v10 | MetadataRequest_v11 | MetadataRequest_v12


class TopicMetadataRequest(Request[_Versions]):  # type: ignore[misc]
    """Metadata of the named topics, in a version that carries their ids; never creates one."""

    API_KEY = METADATA_KEY

    def __init__(self, topics: list[str]) -> None:
        self._topics = topics

    def build(self, request_struct_class: type[Any]) -> Any:
        topics: list[tuple[uuid.UUID, str, dict[int, bytes]]] = [
            (_NO_ID, name, {}) for name in self._topics
        ]
        if request_struct_class.API_VERSION == 10:
            return request_struct_class(topics, False, False, False, {})
        return request_struct_class(topics, False, False, {})


@dataclass(frozen=True)
class TopicState:
    """A topic as the broker has it: its id (None: the broker gave the all-zero id) and its
    partitions."""

    topic_id: uuid.UUID | None
    partitions: frozenset[int]


async def topic_state(client: Any, topic: str, node_id: int | None = None) -> TopicState | None:
    """``topic`` as a broker has it now (``node_id``, else any the client ``client``, an
    ``AIOKafkaClient``, knows): None if it does not exist (deleted, not made again yet).
    Each broker answers from its own copy of the cluster's metadata, which may lag another's:
    ask the one whose records are to be vouched for. ``TopicIdsUnsupported`` on a broker older
    than Kafka 2.8; aiokafka's errors of a request (``KafkaError``) as they come."""
    if node_id is None:
        node_id = client.get_random_node()
    if node_id is None:
        raise NodeNotReadyError("no broker known yet")
    try:
        # on a connection of its own (a consumer without a group never uses the coordination
        # one): a broker answers a connection's requests in turn, and the consumer's fetch
        # may be waiting there for records (``fetch_max_wait_ms``)
        response = await client.send(
            node_id, TopicMetadataRequest([topic]), group=ConnectionGroup.COORDINATION
        )
    except (NotImplementedError, IncompatibleBrokerVersion) as error:
        # aiokafka: no version both sides know (or none negotiated: ``api_version`` given)
        raise TopicIdsUnsupported(str(error)) from error
    for error_code, name, topic_id, _, partitions, _, _ in response.topics:
        if name != topic:
            continue
        if error_code == UnknownTopicOrPartitionError.errno:
            return None
        if error_code:
            raise for_code(error_code)(f"metadata of {topic}")
        return TopicState(
            None if topic_id == _NO_ID else topic_id,
            frozenset(partition[1] for partition in partitions),
        )
    return None
