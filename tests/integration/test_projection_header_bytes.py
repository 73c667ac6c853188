"""A record whose header name is not UTF-8 on the events topic, in one producer batch with
events: the projection worker, ``blackjack audit`` and ``projections rebuild`` stopped at it
(aiokafka raised out of every fetch of it), and no event after it on its partition was ever
folded. No handler writes one; anyone who may write to the topic can."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from blackjack.audit.audit import run_audit
from blackjack.bus.header_names import record_sha256
from blackjack.messages import wire
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections import schema
from blackjack.projections.health import FoldHealth
from blackjack.projections.rebuild import rebuild
from blackjack.projections.writer import Position, ProjectionWriter, Record
from tests.integration.cli_runs import blackjack
from tests.integration.conftest_projections import (
    SHOE_KEY,
    EventsTopic,
    StoreFactory,
    play_tables,
    publish,
    to_wire,
    worker_env,
)
from tests.integration.header_bytes import (
    JUNK,
    Sent,
    send_one_batch,
    write_raw_header_names,
)
from tests.integration.test_projection_poison import running_worker

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

WAIT_S = 60.0
LOG = play_tables([("table-header-bytes", "mini-h17")], rounds=4, seed=13)
UNREADABLE = "blackjack_projection_unreadable_records_total"


async def junk_among_events(
    topic: EventsTopic,
    seal: ShoeSeal,
    monkeypatch: pytest.MonkeyPatch,
    sent_junk: list[Sent] | None = None,
) -> tuple[Position, int, int]:
    """Half the table's events, then the rest in one producer batch with a record whose header
    name is not UTF-8 (a copy of an event: never folded) among them; the table's partition,
    that record's offset and the end of the partition (the junk as sent in ``sent_junk``)."""
    write_raw_header_names(monkeypatch)
    envelopes = to_wire(LOG.envelopes, seal)
    half = len(envelopes) // 2
    [key] = await publish(topic, envelopes[:half])

    def sent(envelope: wire.WireEnvelope) -> Sent:
        headers = wire.cloudevents_headers(envelope, "tests/projections")
        return (envelope.stream_id.encode(), wire.encode(envelope), headers)

    rest = [sent(e) for e in envelopes[half:]]
    junk = (rest[1][0], rest[1][1], [*rest[1][2], *JUNK])
    if sent_junk is not None:
        sent_junk.append(junk)
    offsets = await send_one_batch(topic.bootstrap, key[0], key[1], [rest[0], junk, *rest[1:]])
    return key, offsets[1], offsets[-1] + 1


async def test_the_worker_steps_over_it_and_folds_the_events_after_it_in_its_batch(
    events_topic: EventsTopic,
    stores: StoreFactory,
    shoe_seal: ShoeSeal,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stepped over, its position stored with the fold of the events around it, named in an
    error log and counted; every event is folded once (its copy in the junk is not)."""
    key, junk, end = await junk_among_events(events_topic, shoe_seal, monkeypatch)
    store = await stores.store()
    before = REGISTRY.get_sample_value(UNREADABLE) or 0.0
    with capture_logs() as logs:
        async with running_worker(events_topic, store, FoldHealth(stuck_after=3)) as writer:
            await writer.wait_for({key: end}, WAIT_S)
    assert (await writer.stored_positions())[key] == end
    async with store.reading() as connection:
        folded = (await connection.execute(schema.events.select())).all()
    assert len(folded) == len(LOG.envelopes)
    assert REGISTRY.get_sample_value(UNREADABLE) == before + 1
    [logged] = [e for e in logs if e["log_level"] == "error"]
    assert logged["record"] == f"{key[0]}@{junk}" and logged["kafka_partition"] == key[1]


async def test_the_audit_reports_it_as_a_finding_and_a_rebuild_names_it(
    events_topic: EventsTopic,
    stores: StoreFactory,
    shoe_seal: ShoeSeal,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The audit's rebuild from offset 0 steps over it as the live worker did (the stores
    agree) and reads the events after it; what it holds is not audited, so the audit fails
    and names it rather than passing over it. ``projections rebuild`` names it too."""
    key, junk, end = await junk_among_events(events_topic, shoe_seal, monkeypatch)
    live = await stores.store()
    unreadable: list[Record] = []
    await rebuild(ProjectionWriter(live), events_topic.bootstrap, key[0], unreadable=unreadable)
    assert [(r.topic, r.partition, r.offset) for r in unreadable] == [(*key, junk)]

    report = await run_audit(live, await stores.store(), events_topic.bootstrap, key[0], shoe_seal)
    assert [(r.topic, r.partition, r.offset) for r in report.unreadable] == [(*key, junk)]
    assert report.positions == {key: end}  # the live store stepped over it too
    assert report.events == len(LOG.envelopes)
    assert report.differences == [] and report.violations == [] and report.findings == []
    assert not report.ok
    rendered = report.render()
    assert f"{key[0]}[{key[1]}] offset {junk}" in rendered and "AUDIT FAILED" in rendered


async def test_such_a_record_that_is_no_event_either_is_named_once(
    events_topic: EventsTopic,
    stores: StoreFactory,
    shoe_seal: ShoeSeal,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The operations review: a record no reader can read that holds no event either (no
    ce_type, a value not an envelope) was listed by the audit twice, under "Records no reader
    can read" and again in the note of records not written by the service. Named once, as the
    first: what it holds is not read."""
    write_raw_header_names(monkeypatch)
    [key] = await publish(events_topic, to_wire(LOG.envelopes, shoe_seal))
    [junk] = await send_one_batch(events_topic.bootstrap, key[0], key[1], [(b"x", b"junk2", JUNK)])
    live = await stores.store()
    await rebuild(ProjectionWriter(live), events_topic.bootstrap, key[0])
    report = await run_audit(live, await stores.store(), events_topic.bootstrap, key[0], shoe_seal)
    assert [(r.topic, r.partition, r.offset) for r in report.unreadable] == [(*key, junk)]
    rendered = report.render()
    assert report.foreign == [] and rendered.count(f"offset {junk}") == 1, rendered
    # past the live positions (a worker that has not reached it yet): named once, as such
    # (the diff review: with the fix above, it was named nowhere)
    behind = await stores.store()
    await rebuild(ProjectionWriter(behind), events_topic.bootstrap, key[0], stop={key: junk})
    report = await run_audit(
        behind, await stores.store(), events_topic.bootstrap, key[0], shoe_seal
    )
    assert report.unreadable == [] and report.unreadable_past == [(*key, junk)]
    rendered = report.render()
    assert rendered.count(f"offset {junk}") == 1 and "no reader can read" in rendered, rendered


def acknowledgment(where: tuple[str, int, int], sha256: str) -> dict[str, object]:
    topic, partition, offset = where
    return {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "sha256": sha256,
        "by": "ops-jane",
        "date": "2026-12-03",
        "reason": "INC-4711: a test producer wrote to the live topic",
    }


async def test_an_operator_acknowledges_that_record_and_the_audit_passes_on_it_alone(
    events_topic: EventsTopic,
    stores: StoreFactory,
    shoe_seal: ShoeSeal,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Before, every audit failed for good once such a record lay below the live positions,
    and nothing could acknowledge it. ``blackjack audit --acknowledged FILE`` takes the record
    by topic, partition, offset and the SHA-256 of its key, value and headers as written (the
    audit prints it): acknowledged, the audit passes and says by whom, when and why; a wrong
    digest (another record at that place) is not accepted, and an acknowledgment of a place
    where no such record is fails nothing but is named."""
    sent: list[Sent] = []
    key, junk, end = await junk_among_events(events_topic, shoe_seal, monkeypatch, sent)
    [(junk_key, junk_value, junk_headers)] = sent
    digest = record_sha256(junk_key, junk_value, junk_headers)
    url = await stores.url()
    await rebuild(ProjectionWriter(await stores.store(url)), events_topic.bootstrap, key[0])
    env = worker_env(events_topic, url, BLACKJACK_SHOE_KEY=SHOE_KEY)
    where = (*key, junk)

    failed = blackjack("audit", env=env)
    assert failed.returncode == 1, failed.stderr
    assert f"{key[0]}[{key[1]}] offset {junk} sha256 {digest}" in failed.stdout
    assert "AUDIT FAILED" in failed.stdout

    right = tmp_path / "acknowledged.json"
    elsewhere = acknowledgment((key[0], key[1], end + 7), "0" * 64)
    right.write_text(json.dumps({"acknowledged": [acknowledgment(where, digest), elsewhere]}))
    passed = blackjack("audit", "--acknowledged", str(right), env=env)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "0 finding(s), 1 acknowledged" in passed.stdout
    assert (
        f"offset {junk} sha256 {digest}: acknowledged by ops-jane on 2026-12-03: INC-4711"
        in passed.stdout
    )
    assert f"no such record was stepped over: {key[0]}[{key[1]}] offset {end + 7}" in (
        passed.stdout
    )
    assert "AUDIT PASSED" in passed.stdout

    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"acknowledged": [acknowledgment(where, "f" * 64)]}))
    refused = blackjack("audit", "--acknowledged", str(wrong), env=env)
    assert refused.returncode == 1, refused.stderr
    assert f"names this position with sha256 {'f' * 64}: another record" in refused.stdout
    assert "1 finding(s)" in refused.stdout and "AUDIT FAILED" in refused.stdout

    unsigned = tmp_path / "unsigned.json"
    unsigned.write_text(json.dumps({"acknowledged": [{**acknowledgment(where, digest), "by": ""}]}))
    bad = blackjack("audit", "--acknowledged", str(unsigned), env=env)
    assert bad.returncode == 2 and "acknowledged.0.by" in bad.stderr, bad.stderr
