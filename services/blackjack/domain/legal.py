"""Which buttons to show a player: exactly the commands the decider would accept now.

Each candidate is put to ``decide`` itself, so the buttons can never disagree with the rules
(double, split and insurance disappear when the balance cannot cover them, surrender before the
peek, a second split, a card to a split ace...). ``remove:<box>`` is taking the box's whole bet
back (``RemoveBet`` without an amount; part of it may be taken back too). ``bet:<box>`` is
offered while the player can still bring the box to the table minimum (or add a chip to a box
already at it): the minimum binds the stack when the player deals, not each chip. Where a
move declines insurance (page 002, ``move_declines_insurance``), the moves are offered during
the insurance decision too, on the box they would be played on.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from blackjack.domain import commands as cmd
from blackjack.domain.decide import decide
from blackjack.domain.rejections import Rejection
from blackjack.domain.state import TableState


class TurnChoices(BaseModel):
    model_config = ConfigDict(frozen=True)
    box: int
    hand: int
    actions: tuple[str, ...]


class LegalActions(BaseModel):
    model_config = ConfigDict(frozen=True)
    phase: str
    bet_boxes: tuple[int, ...] = ()
    deal: bool = False
    clear: bool = False
    remove_boxes: tuple[int, ...] = ()  # a bet here can be taken back (all of it, or some)
    pass_round: bool = False
    rebet: tuple[int, ...] = ()
    insurance_boxes: tuple[int, ...] = ()  # insurance can be taken (and paid for) here
    decline_boxes: tuple[int, ...] = ()  # an insurance decision is waiting here
    turn: TurnChoices | None = None

    def buttons(self) -> list[str]:
        """Flat button names, e.g. ``["hit", "stand", "double"]`` or ``["bet:0", "deal"]``."""
        names = [f"bet:{box}" for box in self.bet_boxes]
        names += ["deal"] * self.deal + ["clear"] * self.clear + ["pass"] * self.pass_round
        names += [f"remove:{box}" for box in self.remove_boxes]
        names += [f"rebet:x{m}" for m in self.rebet]
        names += [f"insurance:{box}" for box in self.insurance_boxes]
        names += [f"no_insurance:{box}" for box in self.decline_boxes]
        if self.turn is not None:
            names += list(self.turn.actions)
        return names


def _chip(state: TableState, box: int) -> int:
    """The smallest chip that keeps the box on its way to a bet the table deals."""
    return max(1, state.rules.min_bet - state.boxes[box].bet)


def _accepted(state: TableState, command: cmd.Command, now: datetime) -> bool:
    return not isinstance(decide(state, command, now), Rejection)


def _turn(state: TableState, pid: str, box: int, hand: int, now: datetime) -> TurnChoices:
    candidates: dict[str, cmd.Command] = {
        "hit": cmd.Hit(player_id=pid, box=box, hand=hand),
        "stand": cmd.Stand(player_id=pid, box=box, hand=hand),
        "double": cmd.Double(player_id=pid, box=box, hand=hand),
        "split": cmd.Split(player_id=pid, box=box, hand=hand),
        "surrender": cmd.Surrender(player_id=pid, box=box, hand=hand),
    }
    actions = tuple(name for name, c in candidates.items() if _accepted(state, c, now))
    return TurnChoices(box=box, hand=hand, actions=actions)


def legal_actions(state: TableState, player_id: str, now: datetime) -> LegalActions:
    player = state.players.get(player_id)
    if player is None:
        return LegalActions(phase=state.phase)
    pid = player_id
    own_boxes = [i for i in range(len(state.boxes)) if state.seat_of_box(i) == player.seat]
    turn = None
    if state.active is not None and state.boxes[state.active[0]].player_id == pid:
        turn = _turn(state, pid, *state.active, now)
    elif state.phase == "insurance" and state.rules.move_declines_insurance:
        # Page 002: a move declines the box's insurance; offered on the box that would play
        # first, once it is the last insurance decision open (``decisions/insurance.py``).
        for box in own_boxes:
            if state.boxes[box].insurance == "offered":
                choices = _turn(state, pid, box, 0, now)
                if choices.actions:
                    turn = choices
                    break
    return LegalActions(
        phase=state.phase,
        bet_boxes=tuple(
            b
            for b in own_boxes
            if _accepted(state, cmd.PlaceBet(player_id=pid, box=b, amount=_chip(state, b)), now)
        ),
        deal=_accepted(state, cmd.Deal(player_id=pid), now),
        clear=_accepted(state, cmd.ClearBets(player_id=pid), now),
        remove_boxes=tuple(
            b
            for b in own_boxes
            if state.boxes[b].bet and _accepted(state, cmd.RemoveBet(player_id=pid, box=b), now)
        ),
        pass_round=_accepted(state, cmd.Pass(player_id=pid), now),
        rebet=tuple(
            m
            for m in sorted(state.rules.rebet_multipliers)
            if _accepted(state, cmd.Rebet(player_id=pid, multiplier=m), now)
        ),
        insurance_boxes=tuple(
            b
            for b in own_boxes
            if state.boxes[b].insurance == "offered"
            and _accepted(state, cmd.TakeInsurance(player_id=pid, box=b), now)
        ),
        decline_boxes=tuple(
            b
            for b in own_boxes
            if state.boxes[b].insurance == "offered"
            and _accepted(state, cmd.DeclineInsurance(player_id=pid, box=b), now)
        ),
        turn=turn,
    )
