"""The events a command wrote, read back from its stream's partition of the events topic."""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, TopicPartition

from blackjack.bus.header_names import header_name_not_utf8
from blackjack.messages.envelope import CommandResult
from blackjack.messages.wire import WireEnvelope, decode

# How far before a result's handled_at its events are looked for: they are written in the same
# transaction, stamped by the same handler's clock; the margin covers a batch's duration and
# a broker that stamps records itself (LogAppendTime) with a skewed clock.
EVENTS_LOOKBACK_MS = 60_000


async def collect_events(
    consumer: AIOKafkaConsumer,
    tp: TopicPartition,
    result: CommandResult,
    first: int,
    last: int,
) -> list[WireEnvelope]:
    """Events ``first`` to ``last`` of ``result``'s stream, read from ``tp`` (its partition of
    the events topic, assigned to ``consumer`` here) from ``EVENTS_LOOKBACK_MS`` before the
    result was handled, waited for until they can all be read."""
    consumer.assign([tp])
    since = int(result.handled_at.timestamp() * 1000) - EVENTS_LOOKBACK_MS
    found = (await consumer.offsets_for_times({tp: since})).get(tp)
    if found is None:
        # No record since below the partition's stable end: the events are at or past it.
        # The result can be read before its events are: the commit marker of their
        # transaction reaches each partition in its own time (on a cluster, the events'
        # leader after the results'), and a transaction still open on the partition
        # holds back every record after its first. Before, LookupError at once.
        await consumer.seek_to_end(tp)
    else:
        consumer.seek(tp, found.offset)
    collected: dict[int, WireEnvelope] = {}
    while len(collected) < last - first + 1:
        batch = await consumer.getmany(tp, timeout_ms=500)
        for record in batch.get(tp, []):
            if record.key != result.stream_id.encode() or header_name_not_utf8(record.headers):
                continue  # another stream's, or no event: no handler writes such a name
            envelope = decode(record.value or b"")
            if first <= envelope.sequence <= last:
                collected[envelope.sequence] = envelope
    return [collected[sequence] for sequence in sorted(collected)]
