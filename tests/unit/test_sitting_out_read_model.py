"""Who sits out, in the read model (``Account.sitting_out``, ``rounds_sat_out``) and the
table answer: folded by the projector from the public events as the decider folds them
(``evolve``), event by event, over random play at a shared table, with and without a rule
that frees the seat of a player who sits out, the operator suspending and resuming the table
and standing players up."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blackjack.domain import events as ev
from blackjack.domain.evolve import evolve, fold
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.messages.envelope import EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import to_wire
from blackjack.projections.projector import StreamProjection
from tests.unit.test_properties import START, play_table
from tests.unit.test_round_voided_readers import ben_sits_out_then_a_void

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
STREAM = "t-sit"


def envelope(sequence: int, event: ev.Event) -> EventEnvelope:
    return EventEnvelope(
        event_id=f"{STREAM}-{sequence}",
        type=type(event).__name__,
        schema_version=event.version,
        stream_id=STREAM,
        sequence=sequence,
        occurred_at=START + timedelta(seconds=sequence),
        data=event,
    )


def fold_both(events: list[ev.Event]) -> tuple[int, int]:
    """Folds ``events`` into the decider's state and the read model, checking after each
    event that every seated player's account says what the state says, and that a snapshot
    taken there and restored folds the rest of the log to the same state (the count a void
    takes back included); the most rounds a player sat out and the events at which someone
    sat out."""
    state = INITIAL_STATE
    projection = StreamProjection.new(STREAM)
    most = sitting = 0
    for sequence, event in enumerate(events, start=1):
        state = evolve(state, event)
        restored = TableState.from_doc(state.to_doc())
        assert restored == state, (sequence, event)
        if isinstance(event, ev.DealStarted):  # restored mid-round, folded to the end
            assert fold(events[sequence:], restored) == fold(events[sequence:], state)
        projection.apply(to_wire(envelope(sequence, event), SEAL))
        seated = {pid for pid, account in projection.accounts.items() if account.seated}
        assert seated == set(state.players), (sequence, event)
        for pid, player in state.players.items():
            account = projection.accounts[pid]
            got = (account.sitting_out, account.rounds_sat_out)
            assert got == (player.sitting_out, player.rounds_sat_out), (sequence, event, pid)
            most = max(most, player.rounds_sat_out)
            sitting += player.sitting_out
    return most, sitting


PROPERTY = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@PROPERTY
@given(data=st.data(), seed=st.integers(0, 2**32 - 1), limit=st.sampled_from([None, 1, 2, 3]))
def test_the_read_model_says_who_sits_out_as_the_decider_does(
    data: st.DataObject, seed: int, limit: int | None
) -> None:
    overrides: dict[str, object] = {"void_on_malfunction": True}
    if limit is not None:
        overrides["seat_released_after_rounds_sat_out"] = limit
    events = play_table("atlantic-city-multi", data, seed, overrides, operator=True)
    fold_both(events)


def test_the_random_play_does_sit_players_out_and_count_their_rounds() -> None:
    """The property above is not vacuous: over a few fixed plays, players sit out, rounds
    are counted, a table suspended while a round is dealt does not count it, and rounds are
    voided (one whose deal counted a player who sat out is rare there: the test below)."""
    seen = {"sat": 0, "counted": 0, "suspended deal": 0, "void": 0}

    @settings(
        max_examples=80,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data(), seed=st.integers(0, 2**32 - 1))
    def play(data: st.DataObject, seed: int) -> None:
        overrides: dict[str, object] = {
            "seat_released_after_rounds_sat_out": 3,
            "void_on_malfunction": True,
        }
        events = play_table("atlantic-city-multi", data, seed, overrides, operator=True)
        most, sitting = fold_both(events)
        seen["sat"] += bool(sitting)
        seen["counted"] += most > 0
        state = INITIAL_STATE
        for event in events:
            sitters = any(p.sitting_out for p in state.players.values())
            if isinstance(event, ev.DealStarted) and state.suspended and sitters:
                seen["suspended deal"] += 1
            seen["void"] += isinstance(event, ev.RoundVoided)
            state = evolve(state, event)

    play()
    assert all(seen.values()), seen


def test_a_void_that_takes_a_count_back_folds_alike_from_any_snapshot() -> None:
    """ben sat out round 1 and round 2, which the operator voids after its deal counted it:
    the decider and the read model agree event by event, and a snapshot taken at any event
    and restored folds the rest of the log to the same state."""
    script = ben_sits_out_then_a_void()
    events = [e.data for e in script.envelopes if e.stream_id == "table-1"]
    assert all(isinstance(e, ev.Event) for e in events)
    [void_at] = [i for i, e in enumerate(events) if isinstance(e, ev.RoundVoided)]
    assert fold(events[:void_at]).sat_out_counted  # type: ignore[arg-type]
    most, sitting = fold_both(events)  # type: ignore[arg-type]
    assert most == 2 and sitting > 0
