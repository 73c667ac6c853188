"""Rotating the shoe key (``command_handler.keys``): the first key of the list seals and
signs; the others open what they sealed, and the accepted ones verify what they signed, the
retired ones nothing. A takeover after the rotation resumes a round dealt from a shoe the old
key sealed, and seals the partition's snapshots again under the new key, so that its next
checkpoint needs the old one for nothing but opening older shoes. Without Kafka
(``CommittedLog``)."""

from __future__ import annotations

import pytest

from blackjack.command_handler.keys import ShoeKeys, _parsed, load_shoe_keys
from blackjack.command_handler.signing import CommandSigner
from blackjack.command_handler.snapshots import CheckpointSigner, SnapshotCodec, SnapshotError
from blackjack.configuration import ConfigurationError
from blackjack.domain import commands as cmd
from blackjack.messages.sealing import SealedForOthers, ShoeSeal
from tests.unit.processor_harness import TOPICS
from tests.unit.test_checkpoint_auth import (
    bet,
    checkpoint_record,
    folded,
    state_of,
    take_over,
    unsigned_checkpoint,
    write_checkpoint,
)
from tests.unit.test_rejections import shoe_starting
from tests.unit.test_round_resumed import SOLO, Table

OLD, NEW, OLDEST = (ShoeSeal.new_key_hex() for _ in range(3))


def handler_s(keys: ShoeKeys) -> tuple[SnapshotCodec, CheckpointSigner, CommandSigner]:
    """The snapshot codec and the signers of a handler holding ``keys``, as it makes them."""
    signing, *older = keys.verifying("blackjack/checkpoints/v1")
    return (
        SnapshotCodec(*keys.opening("blackjack/snapshots/v1")),
        CheckpointSigner(signing, TOPICS.snapshots, older=older),
        CommandSigner(*keys.verifying("blackjack/commands/v1")),
    )


def seated_under(keys: ShoeKeys) -> Table:
    """ann seated at a table whose shoes (the first one shuffled as it opens) ``keys`` seal,
    the first shoe starting 20 for her against the dealer's 7."""
    table = Table()
    table.processor.seal = keys.seal()
    table.processor.shuffler = shoe_starting("TS", "7S", "TH", "9S")
    for command in (
        cmd.OpenTable(variant="mini-h17"),
        cmd.SitDown(player_id="ann", seat=0),
        cmd.Deposit(player_id="ann", amount=10_000),
    ):
        assert table.do(command).result.status == "accepted"
    return table


def test_a_key_list_names_the_key_that_seals_and_those_that_open() -> None:
    text = f"{NEW}\n{OLD}   # rotated 2026-12-06\n\nretired:{OLDEST}\n"
    assert _parsed(text, "the key file") == ShoeKeys(NEW, (OLD,), (OLDEST,))
    assert _parsed(f" {NEW}, retired:{OLD} ", "x") == ShoeKeys(NEW, (), (OLD,))
    assert load_shoe_keys({"BLACKJACK_SHOE_KEY": NEW}) == ShoeKeys(NEW)
    roles = ShoeKeys(NEW, (OLD,), (OLDEST,)).key_ids()
    assert list(roles.values()) == ["current", "accepted", "retired"]
    assert list(roles) == [ShoeSeal.from_hex(k).key_id for k in (NEW, OLD, OLDEST)]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("  \n# no key yet\n", "holds no key"),
        (f"{NEW}\n{OLD[:-1]}\n{OLDEST}", "is not a 64-digit hex key (key 2 of 3)"),
        (f"{NEW},{NEW.upper()}", "holds a key twice"),
        (f"{NEW}\nretired:{NEW}", "holds a key twice"),
        (f"retired:{OLD}\n{NEW}", "the first key seals and signs, and cannot be retired"),
        (f"{NEW} old:{OLD}", "is not a 64-digit hex key (key 2 of 2)"),
    ],
)
def test_a_key_list_that_cannot_be_meant_is_refused_in_one_line(text: str, said: str) -> None:
    with pytest.raises(ConfigurationError, match=r"^BLACKJACK_SHOE_KEY.*") as refused:
        load_shoe_keys({"BLACKJACK_SHOE_KEY": text.replace("\n", ",") or " , "})
    assert said in str(refused.value) and "\n" not in str(refused.value)
    assert NEW not in str(refused.value) and OLD not in str(refused.value)  # no key in a log


def test_shoes_open_under_every_key_of_the_list_and_are_sealed_under_the_first() -> None:
    ring = ShoeKeys(NEW, (OLD,), (OLDEST,)).seal()
    for key in (OLD, OLDEST):
        sealed = ShoeSeal.from_hex(key).seal("t-1", 4, ("AS", "KD"), "salt")
        assert ring.unseal("t-1", 4, sealed) == (("AS", "KD"), "salt")
        legacy = ShoeSeal.from_hex(key, writes=1).seal("t-1", 4, ("9C",), "s")  # before key ids
        assert ring.unseal("t-1", 4, legacy) == (("9C",), "s")
    new = ring.seal("t-1", 5, ("2H",), "s")
    assert ShoeSeal.key_id_of(new) == ShoeSeal.from_hex(NEW).key_id
    with pytest.raises(SealedForOthers):  # the rollout before's handler, without the new key
        ShoeSeal.from_hex(OLD).unseal("t-1", 5, new)
    with pytest.raises(SealedForOthers):
        ring.unseal("t-1", 4, ShoeSeal.from_hex(ShoeSeal.new_key_hex()).seal("t-1", 4, (), "s"))


def test_money_steps_signed_under_an_accepted_key_verify_and_under_a_retired_one_do_not() -> None:
    *_, old_signer = handler_s(ShoeKeys(OLD))
    headers = old_signer.headers(b"wallet-ann", b"{}", 7)
    *_, during = handler_s(ShoeKeys(NEW, (OLD,)))
    assert during.verify(b"wallet-ann", b"{}", headers) == (True, 7)
    assert not during.verify(b"wallet-ann", b"{ }", headers)[0]
    *_, after = handler_s(ShoeKeys(NEW, (), (OLD,)))
    assert after.verify(b"wallet-ann", b"{}", headers) == (False, None)
    assert after.verify(b"wallet-ann", b"{}", during.headers(b"wallet-ann", b"{}", 7))[0]


async def test_a_takeover_after_the_rotation_resumes_the_round_and_reseals_the_snapshots() -> None:
    old_codec, old_signer, _ = handler_s(ShoeKeys(OLD))
    table = seated_under(ShoeKeys(OLD))
    bet(table, 500)
    dealt = table.do(cmd.Deal(player_id="ann"))
    assert dealt.result.status == "accepted"  # the shoe, sealed under the old key, in the log
    old_records = await write_checkpoint(table, old_signer, old_codec)
    [old_snapshot] = [r for r in old_records if r.key == SOLO.encode()]

    # 1. the second rollout: the new key seals, the old one is accepted
    codec, signer, _ = handler_s(ShoeKeys(NEW, (OLD,)))
    table.processor.seal = ShoeKeys(NEW, (OLD,)).seal()
    store, stats = await take_over(table, codec=codec, signer=signer)
    assert stats.checkpoint and stats.distrusted is None  # its checkpoint is used
    assert store.checkpoint_due and SOLO in store.dirty  # its snapshot to be written again
    assert state_of(store) == folded(table)
    assert table.do(cmd.Stand(player_id="ann", box=0)).result.status == "accepted"
    records = await write_checkpoint(table, signer, codec)
    [snapshot] = [r for r in records if r.key == SOLO.encode()]
    new_only, *_ = handler_s(ShoeKeys(NEW))
    assert new_only.decode(snapshot.value).state == folded(table)  # sealed under the new key
    with pytest.raises(SnapshotError):
        old_codec.decode(snapshot.value)
    assert old_codec.decode(old_snapshot.value).sequence < new_only.decode(snapshot.value).sequence
    assert dict(checkpoint_record(records).headers)  # signed under the new key: below

    # 2. the old key retired: it opens the old shoe still, and verifies nothing
    codec, signer, _ = handler_s(ShoeKeys(NEW, (), (OLD,)))
    table.processor.seal = ShoeKeys(NEW, (), (OLD,)).seal()
    store, stats = await take_over(table, codec=codec, signer=signer)
    assert stats.checkpoint and stats.distrusted is None and not store.checkpoint_due
    assert state_of(store) == folded(table)


async def test_a_checkpoint_signed_under_a_retired_key_is_not_trusted_yet_the_log_opens() -> None:
    """A key let go of because it leaked: what it signed is not trusted, so the partition is
    read from the start of its log (its shoes opened with the retired key), and a checkpoint
    under the new key written at once."""
    old_codec, old_signer, _ = handler_s(ShoeKeys(OLD))
    table = seated_under(ShoeKeys(OLD))
    bet(table, 500)
    assert table.do(cmd.Deal(player_id="ann")).result.status == "accepted"
    await write_checkpoint(table, old_signer, old_codec)
    codec, signer, _ = handler_s(ShoeKeys(NEW, (), (OLD,)))
    table.processor.seal = ShoeKeys(NEW, (), (OLD,)).seal()
    store, stats = await take_over(table, codec=codec, signer=signer)
    assert stats.distrusted == "forged" and not stats.checkpoint and store.checkpoint_due
    assert state_of(store) == folded(table)


async def test_snapshots_under_an_unsigned_checkpoint_are_sealed_again_too() -> None:
    """The release before signed no checkpoint, and held one key: the first handler of the new
    list to take its partition over seals the snapshots again (a review's drill: they stayed
    under the old key, under a checkpoint the new key signed)."""
    old_codec, *_ = handler_s(ShoeKeys(OLD))
    table = seated_under(ShoeKeys(OLD))
    bet(table, 500)
    await unsigned_checkpoint(table, old_codec)
    keys = ShoeKeys(NEW, (OLD,))
    codec, signer, _ = handler_s(keys)
    table.processor.seal = keys.seal()
    store, stats = await take_over(table, codec=codec, signer=signer)
    assert stats.unsigned and stats.resealed == 1 and SOLO in store.dirty
    records = await write_checkpoint(table, signer, codec)
    [snapshot] = [r for r in records if r.key == SOLO.encode()]
    new_only, *_ = handler_s(ShoeKeys(NEW))
    assert new_only.decode(snapshot.value).state == folded(table)
