"""Voiding a round for a malfunction: the operator's right where the table's rules give it.

Page 000: "Malfunctions voids all pays and plays." A round the game could not play right is
not finished by the cards: every wager it took goes back to its player and nothing it paid
stands, so each balance is what it was before the round (money paid in or taken out meanwhile
apart). The operator names the round, so that a void meant for one since settled cannot void
the next. A round already settled is the platform's to adjust: its money has left the round.
"""

from __future__ import annotations

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import facts
from blackjack.domain.decisions.draft import Draft, refuse
from blackjack.domain.decisions.settlement import hand_result, stand_up_players_sat_out
from blackjack.domain.state import Box, TableState


def void_round(r: Draft, c: cmd.VoidRound) -> None:
    state = r.state
    if not state.rules.void_on_malfunction:
        raise refuse(
            "voiding_not_allowed",
            "this table's rules let no one void a round (void_on_malfunction)",
        )
    if c.round != state.round or not state.round_in_play:
        raise refuse("round_not_in_play", _not_in_play(state, c.round))
    hole = state.hole_card
    if hole is not None and state.phase != "dealer":
        r.emit(facts.dealer_hole_card_revealed(round=state.round, card=hole))
    # No one is stood up for sitting out: a voided round is no round sat out (``evolve``
    # takes back what its deal counted), so no count reaches the table's limit here. Unless
    # the table was restored from a snapshot of the release before that cannot say whether
    # the deal counted (``TableState.sat_out_counted`` None): the void then decides as that
    # release did, the count kept and whom it brings to the limit stood up, and says so, so
    # that every reader of the log folds the counts as this handler has them.
    unknown = state.sat_out_counted is None
    r.emit(
        facts.round_voided(
            round=state.round,
            operator=c.operator,
            reason=c.reason,
            returns=_returns(r),
            counts_as_round_sat_out=unknown,
        )
    )
    if unknown:
        stand_up_players_sat_out(r)


def _returns(r: Draft) -> tuple[ev.VoidedWagers, ...]:
    wagered: dict[str, int] = {}
    paid: dict[str, int] = {}
    for box in r.state.boxes:
        if box.player_id is None or not (box.bet or box.hands):
            continue
        box_wagered, box_paid = _money_of(r, box)
        wagered[box.player_id] = wagered.get(box.player_id, 0) + box_wagered
        paid[box.player_id] = paid.get(box.player_id, 0) + box_paid
    returns = []
    for player_id, stakes in wagered.items():
        balance = r.state.players[player_id].balance
        owed = stakes - paid[player_id]
        # A payment of the round taken out of the table since (only where a blackjack is paid
        # at once) cannot come back from the balance: no balance goes below zero.
        returned = max(owed, -balance)
        returns.append(
            facts.voided_wagers(
                player_id=player_id,
                wagered=stakes,
                paid=paid[player_id],
                returned=returned,
                not_recovered=returned - owed,
                balance_after=balance + returned,
            )
        )
    return tuple(returns)


def _money_of(r: Draft, box: Box) -> tuple[int, int]:
    """What the round took on ``box`` and what it has paid on it so far."""
    if not box.hands:  # bets not dealt yet
        return box.bet, 0
    wagered = sum(hand.stake for hand in box.hands) + box.insurance_stake
    paid = box.insurance_paid  # 0 unless settled: the stake kept by a lost insurance is wagered
    for hand in box.hands:
        if hand.settled:  # settled at once: a blackjack, a surrender, a bust (nothing paid)
            paid += hand_result(r, hand)[1]
    return wagered, paid


def _not_in_play(state: TableState, named: int) -> str:
    if state.round_in_play:
        return f"round {named} is not in play at this table: round {state.round} is"
    if state.round_open:
        return f"round {state.round} holds no wager yet: there is nothing to void"
    return f"no round is in play at this table (round {state.round} has ended)"
