"""Bad input on the real broker: typed rejections on the results topic, nothing else changes,
and the handler keeps running. Resent command ids get the original result, also after a
restart of the handler."""

from __future__ import annotations

import json
from typing import Any

import pytest
from structlog.testing import capture_logs

from blackjack.bus.topics import partition_for
from blackjack.client import BlackjackClient
from blackjack.command_handler.service import CommandHandler
from blackjack.domain import commands as cmd
from blackjack.domain.cards import fresh_shoe
from blackjack.domain.wallet import CashOut, ConfirmBuyIn, WalletDeposit, wallet_stream
from blackjack.messages.envelope import CommandResult
from tests.integration.conftest import (
    KafkaSpace,
    all_results,
    read_topic,
    running_handler,
    stream_events,
    verify_stream,
)

pytestmark = pytest.mark.integration

TABLE = "bad-1"


@pytest.fixture(scope="module")
async def seated(space: KafkaSpace, handler: CommandHandler) -> str:
    async with space.client() as client:
        for command in (
            cmd.OpenTable(variant="mini-h17"),
            cmd.SitDown(player_id="p"),
            cmd.Deposit(player_id="p", amount=10_000),
        ):
            assert (await client.execute(TABLE, command)).status == "accepted"
    return TABLE


def envelope(command_id: str, stream: str, command: dict[str, Any]) -> bytes:
    return json.dumps({"command_id": command_id, "stream_id": stream, "command": command}).encode()


async def raw(
    client: BlackjackClient, space: KafkaSpace, key: bytes, value: bytes
) -> CommandResult:
    """Send bytes; the result of an unparsable message is named after its offset (a number
    of more digits than Python reads does not make it unparsable: its id is read)."""
    offset = await client.send_raw(key, value)
    try:
        document = json.loads(value, parse_int=str)  # (UTF-16 too: its ids are quoted)
        command_id = document["command_id"]
    except (ValueError, KeyError, TypeError, RecursionError):
        partition = partition_for(key.decode(), space.partitions)
        command_id = f"unparsed-{partition}-{offset}"
    return await client.result(command_id)


async def answer_ids(space: KafkaSpace, stream: str, command_id: str) -> list[bytes]:
    """The CloudEvents ids of the answers on the results topic to ``command_id`` at ``stream``,
    in their order."""
    return [
        dict(record.headers)["ce_id"]
        for record in await read_topic(space, space.topics.results)
        if record.key == stream.encode()
        and CommandResult.model_validate_json(record.value).command_id == command_id
    ]


def code(result: CommandResult) -> str:
    assert result.status == "rejected" and result.rejection is not None, result
    return result.rejection.code


async def test_malformed_and_unknown_messages_get_typed_rejections_and_change_nothing(
    space: KafkaSpace, client: BlackjackClient, seated: str
) -> None:
    before = await stream_events(space, seated)
    key = seated.encode()
    bet = {"type": "PlaceBet", "player_id": "p", "box": 0}
    in_utf8 = envelope("utf-16", seated, {**bet, "amount": 100}).decode()
    cases = {
        b"this is not JSON {": "malformed",
        # a valid bet in other encodings than UTF-8, which Python's JSON reader would take: a
        # gateway reading UTF-8 (RFC 8259) cannot check it, so none is decided (a fuzz review)
        in_utf8.encode("utf-16"): "malformed",
        in_utf8.replace("utf-16", "utf-16-be").encode("utf-16-be"): "malformed",
        in_utf8.replace("utf-16", "utf-32").encode("utf-32"): "malformed",
        in_utf8.replace("utf-16", "bom").encode("utf-8-sig"): "malformed",
        b"[1, 2, 3]": "malformed",
        b"": "malformed",
        envelope("bad-fields", seated, {**bet, "amont": 100}): "malformed",
        envelope("bad-amount", seated, {**bet, "amount": 10.5}): "malformed",
        envelope("bad-string-amount", seated, {**bet, "amount": "100"}): "malformed",
        envelope("no-command", seated, {}): "malformed",
        envelope("bad-type", seated, {"type": "Fly", "player_id": "p"}): "unknown_command",
        # records that break the JSON reader itself: answered, and the partition goes on
        envelope("x", seated, bet)[:-2] + b', "amount": ' + b"9" * 5000 + b"}}": "malformed",
        envelope("x", seated, {})[:-3] + b"[" * 100_000 + b"]" * 100_000 + b"}": "malformed",
        # a NUL in a player id: PostgreSQL's read model cannot store it (test_unprintable_text)
        envelope("nul-player", seated, {"type": "Deposit", "player_id": "p\x00", "amount": 1}): (
            "malformed"
        ),
        # a key named twice: which command is it? (test_duplicate_keys)
        envelope("dup-type", seated, {"type": "Deal", "player_id": "p"})[:-2]
        + b', "type": "Stand", "box": 0}}': "malformed",
        envelope(
            "wallet-cmd-at-table",
            seated,
            {"type": "BuyIn", "player_id": "p", "table_id": "x", "amount": 5},
        ): "malformed",
    }
    for value, expected in cases.items():
        result = await raw(client, space, key, value)
        assert code(result) == expected, (value, result)
        assert result.stream_id == seated
    good_bet = {**bet, "amount": 100}
    wrong_key = await raw(client, space, b"another-key", envelope("wrong-key", seated, good_bet))
    assert code(wrong_key) == "malformed" and "key" in wrong_key.rejection.message  # type: ignore[union-attr]
    to_wallet = await client.execute(wallet_stream("p"), cmd.Hit(player_id="p", box=0))
    assert code(to_wallet) == "unknown_command"

    # The handler is alive, the table unchanged, and a corrected resend of a malformed id works.
    assert await stream_events(space, seated) == before
    fixed = await client.execute(
        seated, cmd.PlaceBet(player_id="p", box=0, amount=100), command_id="bad-fields"
    )
    assert fixed.status == "accepted"
    await verify_stream(space, seated)


async def test_an_invalid_command_s_log_line_says_why(kafka_space: Any) -> None:
    """BlackjackInvalidCommands pages on malformed, unknown or unauthorized commands; the
    "command handled" line gave only the code, so the reason had to be read from the results
    topic (an SRE review). It carries the reason now, 200 characters at most."""
    space: KafkaSpace = await kafka_space(partitions=1)
    long_type = "Fly" * 200
    with capture_logs() as logs:
        async with running_handler(space.config()), space.client() as client:
            unknown = await raw(
                client, space, b"t", envelope("u", "t", {"type": long_type, "player_id": "p"})
            )
            refused = await client.execute("t", cmd.ShuffleShoe(order=fresh_shoe(1), salt="s" * 16))
            fine = await client.execute("t", cmd.OpenTable(variant="mini-h17"))
    assert code(unknown) == "unknown_command" and code(refused) == "unauthorized"
    assert fine.status == "accepted"
    # (the ids are bound as context variables, which capture_logs leaves out)
    handled = [e for e in logs if e["event"] == "command handled"]
    assert unknown.rejection is not None and refused.rejection is not None
    assert len(unknown.rejection.message) > 200
    assert [(e["code"], e.get("reason")) for e in handled] == [
        ("unknown_command", unknown.rejection.message[:200]),
        ("unauthorized", refused.rejection.message),
        (None, None),
    ]
    assert "reason" not in handled[-1]  # an accepted command's line is as long as before


async def test_a_copy_resent_after_a_byte_order_mark_gets_the_answer_it_had(
    space: KafkaSpace, client: BlackjackClient
) -> None:
    """A command the stream decided, resent with the same id after a byte-order mark (a
    release before read such bytes: an upgrade drill): its answer under its own id (the ids
    of JSON in another encoding are quoted, never decided), and nothing decided again."""
    table = "bom-copies"
    deposit = {"type": "Deposit", "player_id": "p", "amount": 100}
    for command_id, command in (
        ("open", {"type": "OpenTable", "variant": "mini-h17"}),
        ("sit", {"type": "SitDown", "player_id": "p"}),
        ("taken-once", deposit),
    ):
        assert (
            await raw(client, space, table.encode(), envelope(command_id, table, command))
        ).status == "accepted"
    taken = await client.result("taken-once", stream_id=table)
    events = await stream_events(space, table)
    resent = envelope("taken-once", table, deposit).decode().encode("utf-8-sig")
    assert await raw(client, space, table.encode(), resent) == taken
    assert await stream_events(space, table) == events
    await verify_stream(space, table, resent=["taken-once"])


async def test_a_command_that_quotes_a_megabyte_is_answered_and_its_partition_goes_on(
    space: KafkaSpace, client: BlackjackClient, seated: str
) -> None:
    """Its rejection once quoted it whole: a result over the broker's record limit failed the
    transaction on every retry, and the partition stopped for good (an integrator's review)."""
    huge = {"type": "OpenTable", "variant": "v" * 1_040_000}
    result = await raw(client, space, seated.encode(), envelope("huge-variant", seated, huge))
    assert code(result) == "malformed" and len(result.model_dump_json()) < 2_000
    # the next command of the same table (the same partition) is handled
    after = await client.execute(seated, cmd.PlaceBet(player_id="p", box=0, amount=100))
    assert after.status == "accepted"
    await verify_stream(space, seated)


async def test_commands_only_the_service_may_issue_are_unauthorized(
    space: KafkaSpace, client: BlackjackClient, seated: str
) -> None:
    before = await stream_events(space, seated)
    shuffle = cmd.ShuffleShoe(order=fresh_shoe(8), salt="0123456789abcdef0123")
    assert code(await client.execute(seated, shuffle)) == "unauthorized"
    wallet = wallet_stream("mallory")
    assert (await client.execute(wallet, WalletDeposit(player_id="mallory", amount=1))).status == (
        "accepted"
    )
    for forged in (
        CashOut(player_id="mallory", table_id=seated, amount=1_000_000),
        ConfirmBuyIn(player_id="mallory", transfer=1),
    ):
        assert code(await client.execute(wallet, forged)) == "unauthorized"
    assert await stream_events(space, seated) == before
    check = await verify_stream(space, wallet)
    assert check.state.balance == 1


async def test_a_resent_command_id_gets_the_original_result_and_no_new_events(
    space: KafkaSpace, client: BlackjackClient, seated: str
) -> None:
    first = await client.execute(
        seated, cmd.PlaceBet(player_id="p", box=0, amount=300), command_id="bet-once"
    )
    rejected = await client.execute(
        seated, cmd.PlaceBet(player_id="p", box=0, amount=-5), command_id="bad-bet-once"
    )
    assert first.status == "accepted" and code(rejected) == "invalid_amount"
    events = await stream_events(space, seated)
    # The same commands again: the original answers, nothing written.
    again = await client.execute(
        seated, cmd.PlaceBet(player_id="p", box=0, amount=300), command_id="bet-once"
    )
    rejected_again = await client.execute(
        seated, cmd.PlaceBet(player_id="p", box=0, amount=-5), command_id="bad-bet-once"
    )
    assert again == first and rejected_again == rejected
    # other commands under those ids are no copies (test_command_id_reused): refused
    for other, command_id in (
        (cmd.PlaceBet(player_id="p", box=0, amount=999), "bet-once"),
        (cmd.Deal(player_id="p"), "bad-bet-once"),
    ):
        answer = await client.execute(seated, other, command_id=command_id)
        assert code(answer) == "malformed" and "its fields differ" in str(answer.rejection)
    # another player's command under the first one's id is no copy (test_command_id_reused)
    stolen = await client.execute(
        seated, cmd.PlaceBet(player_id="q", box=0, amount=300), command_id="bet-once"
    )
    assert code(stolen) == "malformed"
    assert await stream_events(space, seated) == events
    await verify_stream(space, seated, resent=["bet-once", "bad-bet-once"])


async def test_idempotency_survives_a_handler_restart(kafka_space: Any) -> None:
    space: KafkaSpace = await kafka_space(partitions=2)
    table = "restart-1"
    async with running_handler(space.config()), space.client() as client:
        opened = await client.execute(table, cmd.OpenTable(variant="surrender"), command_id="o-1")
        refused = await client.execute(table, cmd.Hit(player_id="nobody", box=0), command_id="h-1")
        assert opened.status == "accepted" and code(refused) == "not_seated"
    events = await stream_events(space, table)
    async with running_handler(space.config()), space.client() as client:
        # Rebuilt from the log: the accepted id from the events and the results, the rejected
        # one from the results topic, each with its command's digest: a copy gets the
        # original answer, another command under the id is refused
        assert (
            await client.execute(table, cmd.OpenTable(variant="surrender"), command_id="o-1")
            == opened
        )
        assert (
            await client.execute(table, cmd.Hit(player_id="nobody", box=0), command_id="h-1")
            == refused
        )
        for other, command_id in (
            (cmd.OpenTable(variant="mini-h17"), "o-1"),
            (cmd.SitDown(player_id="nobody"), "h-1"),
        ):
            answer = await client.execute(table, other, command_id=command_id)
            assert code(answer) == "malformed" and "its fields differ" in str(answer.rejection)
        # another table's answer under the same command id
        assert (
            await client.execute("restart-2", cmd.OpenTable(variant="surrender"), command_id="o-1")
        ).status == "accepted"
    assert await stream_events(space, table) == events
    await verify_stream(space, table, resent=["o-1", "h-1"])
    # CloudEvents: source and id name one event. The original answer written again to a copy
    # (after the rebuild too) is that event again; the refusal of another command under the
    # id, and another table's answer under it, are others (all were result/o-1 before).
    opened_ids = await answer_ids(space, table, "o-1")
    refused_ids = await answer_ids(space, table, "h-1")
    for first, copy, another in (opened_ids, refused_ids):
        assert first == copy != another and first.startswith(b"result/")
    [elsewhere] = await answer_ids(space, "restart-2", "o-1")
    assert elsewhere not in opened_ids


async def test_a_command_id_of_the_form_unparsed_answers_never_meets_another_record_s(
    kafka_space: Any,
) -> None:
    """``unparsed-<partition>-<offset>`` names the answer to a record that cannot be read, and a
    platform finds that answer by it (docs/kafka.md). A command that took such an id for
    itself was accepted under it: the results topic then held two answers under one id, and
    the sender of the unreadable record at that offset, waiting for the first, read the
    other command's "accepted"."""
    space: KafkaSpace = await kafka_space(partitions=1)
    async with running_handler(space.config()), space.client() as client:
        first = await client.send_raw(b"squat", b"not JSON")
        squatted = f"unparsed-0-{first + 2}"  # the offset of the next unreadable record
        opening = {"type": "OpenTable", "variant": "mini-h17"}
        taken = await client.send_raw(b"squat", envelope(squatted, "squat", opening))
        unreadable = await client.send_raw(b"squat", b"not JSON either")
        assert (taken, unreadable) == (first + 1, first + 2)
        answer = await client.result(squatted)
        # the unreadable record's own answer, not the squatting command's
        assert code(answer) == "malformed" and answer.rejection is not None
        assert answer.rejection.message.startswith("not JSON"), answer.rejection
        refused = await client.result(f"unparsed-0-{taken}")
    assert code(refused) == "malformed" and refused.rejection is not None
    assert "unparsed-" in refused.rejection.message
    assert [r.command_id for r in await all_results(space)] == [
        f"unparsed-0-{offset}" for offset in (first, taken, unreadable)
    ]
    assert await stream_events(space) == []
