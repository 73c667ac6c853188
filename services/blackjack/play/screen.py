"""The table as one player sees it, drawn with rich: pure, no I/O (the caller prints it).

Everything comes from the table's public view (the read model's fold): the dealer's hole card
is face down until revealed, the shoe is a count of cards dealt.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.padding import Padding
from rich.panel import Panel
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from blackjack.domain.commands import UNPRINTABLE
from blackjack.domain.currencies import money
from blackjack.domain.rules import Rules, preset_term
from blackjack.messages.envelope import CommandResult
from blackjack.play.table_rules import boxes_per_seat, shared_table
from blackjack.projections.projector import StreamProjection
from blackjack.projections.views import (
    Account,
    BoxView,
    HandView,
    InsuranceView,
    RoundPlayer,
    RoundRecord,
    TableView,
)
from blackjack.projections.wallets import WalletView
from blackjack.rules_sheet import Returns, rules_sheet

_SERVER_DID = {
    "stood": "stood by the server: no move in time",
    "declined_insurance": "insurance declined by the server: no answer in time",
    "dealt_in": "dealt in by the server at the deadline: no Deal or Pass in time",
    "left_out": "left out of the round by the server: no bet or pass in time",
}
_CLOCK_STARTED = {
    "RoundOpened": "betting_deadline",
    "InsuranceOffered": "deadline",
    "TurnStarted": "deadline",
}
"""The events that start a clock, and the field of their deadline (a hand's turn keeps its
deadline through its TurnStarted after each card)."""
_RETURNED_BECAUSE = {
    "timed_out": "under the minimum at the deadline",
    "disconnected": "disconnected before Deal",
    "left": "left the table",
    "cancelled": "the round was cancelled or closed",
    "stood_up": "stood up by the operator",
    "passed": "passed this round",
}

SUITS = {"S": "♠", "H": "♥", "D": "♦", "C": "♣"}
RED = {"H", "D"}


_NOT_SHOWN = re.compile(f"(?!\\n)[{UNPRINTABLE}]")
"""What the terminal is not given of a text (a line break is the screen's own)."""


class ScreenConsole(Console):
    """The play session's console: the texts others wrote, read from the log (an operator's
    reason, a player's id), reach the terminal without their control, line-breaking or
    bidirectional formatting characters (U+FFFD in their place). The commands refuse them,
    but a log written before may hold them: ESC [2J in a TableSuspended's reason cleared the
    player's screen. The console's own styles are not text and still apply."""

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and _NOT_SHOWN.search(segment.text):
                yield Segment(_NOT_SHOWN.sub("\ufffd", segment.text), segment.style)
            else:
                yield segment


def card(code: str | None) -> Text:
    if code is None:
        return Text("▒▒", style="bold blue")
    rank = "10" if code[0] == "T" else code[0]
    return Text(f"{rank}{SUITS[code[1]]}", style="bold red" if code[1] in RED else "bold")


def cards(codes: list[str] | list[str | None]) -> Text:
    return Text(" ").join(card(code) for code in codes) if codes else Text("-")


def _total(total: int, soft: bool) -> str:
    return f"{'soft ' if soft and total <= 21 else ''}{total}" if total else ""


def _hand_line(
    hand: HandView, currency: str, server: str | None = None, *, split_marked: bool = False
) -> Text:
    natural = len(hand.cards) == 2 and hand.total == 21 and not hand.split
    paid_as_one = natural and hand.outcome == "blackjack"  # said once: "blackjack pays ..."
    total = "" if paid_as_one else "blackjack" if natural else _total(hand.total, hand.soft)
    line = Text.assemble(cards(hand.cards), "  ", (total, "bold"))
    marks = [
        word
        for word, on in (
            ("split", hand.split and split_marked),
            ("doubled", hand.doubled),
            ("surrendered", hand.surrendered and hand.outcome != "surrender"),  # said once
        )
        if on
    ]
    if marks:
        line.append(f"  ({', '.join(marks)})", style="dim")
    if server is not None:
        line.append(f"  ({server})", style="bold yellow")
    if hand.outcome is None and hand.total > 21 and not hand.voided:
        # Lost whatever the dealer turns over, though settled with the round at this table
        # (``bust_settled_at_once`` off): said at once, as every page has it lost.
        line.append("  bust", style="yellow")
    if hand.outcome is not None:
        paid = paid_words(hand.stake, hand.payout or 0, currency)
        gap = "" if paid_as_one else "  "
        if hand.voided:  # settled before the round was voided: the void took the pay back
            line.append(f"{gap}{hand.outcome}{paid}, voided", style="dim")
        else:
            line.append(f"{gap}{hand.outcome}{paid}", style="green" if hand.payout else "yellow")
    return line


def paid_words(stake: int, payout: int, currency: str) -> str:
    """A settled wager's money as the rule pages say it: "pays" is what it wins ("a $10 bet
    pays out $10 and you get your initial bet back", page 003; "$5 (your bet) plus $7", page
    002), and what comes back to the balance follows. "pays" once read as the whole return:
    a push "pays 7.50", a 5.00 blackjack "pays 12.00" where page 002 says it pays 7."""
    if not payout:
        return ""
    back = money(payout, currency)
    if payout > stake:
        return f" pays {money(payout - stake, currency)} ({back} back)"
    return f", {back} back"  # a push, or half of it on a surrender: nothing won


def server_decisions(record: RoundRecord) -> dict[tuple[str, int | None, int | None], str]:
    """What the server decided in a player's place in the round (its clock, or an operator
    closing an interrupted round: ``PlayerTimedOut``), by (player, box, hand): a hand it
    stood, a box whose insurance it declined, a player it dealt in or left out."""
    decided: dict[tuple[str, int | None, int | None], str] = {}
    closed_by = None
    deadline: object = None
    interrupted = False
    """the service was interrupted while the clock that ran out ran, and did not restart it
    (a shared table keeps its deadline): "no move in time" alone blamed the player (a review)"""
    for entry in record.log:
        data = entry.data
        if entry.event == "InterruptedRoundClosed":
            closed_by = f"the operator closed the round after {data.get('after_days')} days"
        if entry.event in _CLOCK_STARTED:
            started = data.get(_CLOCK_STARTED[entry.event])
            interrupted = interrupted and started == deadline
            deadline = started
        if entry.event == "RoundResumed":
            interrupted = data.get("deadline") is None
        if entry.event != "PlayerTimedOut":
            continue
        action = str(data.get("action"))
        said = _SERVER_DID.get(action, f"{action} by the server")
        if closed_by is not None:  # not the clock: the operator's closing of the round
            said = f"{said.split(':')[0]}: {closed_by}"
        elif interrupted:
            said = f"{said} (the service was interrupted while the time ran)"
        decided[(str(data.get("player_id")), data.get("box"), data.get("hand"))] = said
    return decided


def round_notes(
    record: RoundRecord, player_id: str, currency: str, by_wallet: bool, seated: bool = False
) -> list[tuple[str, Text]]:
    """The lines a player needs to know what happened to their bets outside their own moves:
    what the server decided for whoever was not at the table in time (their own named as
    theirs), the bets given back and why, and the service interrupted and resumed."""
    notes: list[tuple[str, Text]] = []
    for (player, box, _), said in server_decisions(record).items():
        if box is None:  # a box's own (a hand stood, insurance declined) is shown with it
            notes.append(("You" if player == player_id else player, Text(said, "bold yellow")))
    for entry in record.log:
        data = entry.data
        if entry.event == "RoundResumed":
            notes.append(
                (
                    "Service",
                    Text(
                        resumed_line(data.get("last_event_at"), entry.at, data.get("deadline")),
                        "red",
                    ),
                )
            )
            continue
        if entry.event == "SeatLeft" and data.get("reason") in ("sat_out", "operator"):
            notes.append(_stood_up(data, player_id, currency, by_wallet, seated))
            continue
        if entry.event == "RoundVoided":
            notes.append(("Round", _voided(data, player_id, currency)))
            continue
        if entry.event != "BetRefunded" or data.get("reason") not in _RETURNED_BECAUSE:
            continue
        who = "your" if data.get("player_id") == player_id else f"{data.get('player_id')}'s"
        amount = money(int(data.get("amount", 0)), currency)
        reason = _RETURNED_BECAUSE[str(data.get("reason"))]
        notes.append(
            (f"Box {data.get('box')}", Text(f"{who} bet of {amount} returned: {reason}", "yellow"))
        )
    return notes


def _voided(data: Mapping[str, Any], player_id: str, currency: str) -> Text:
    """The operator voided the round (page 000: "Malfunctions voids all pays and plays"):
    why, and what came back to the player (another's money is theirs alone)."""
    said = f"voided by the operator for a malfunction ({data.get('reason')}): every wager back"
    for back in data.get("returns") or []:
        if back.get("player_id") == player_id:
            returned = int(back.get("returned", 0))
            if returned < 0:  # the round had paid more than it took: a payment taken back
                said += f", {money(-returned, currency)} {currency} taken back from you"
            else:
                said += f", {money(returned, currency)} {currency} to you"
            if back.get("not_recovered"):
                kept = money(int(back["not_recovered"]), currency)
                said += f" ({kept} paid earlier and taken out could not be taken back)"
    return Text(said, "bold yellow")


def _stood_up(
    data: Mapping[str, Any], player_id: str, currency: str, by_wallet: bool, seated: bool
) -> tuple[str, Text]:
    """A player the server stood up as the round ended, after the rounds they sat out in a
    row (the table's ``seat_released_after_rounds_sat_out``), or the operator stood up
    (``StandUpPlayer``, in a round or between rounds), said to them and to the others: why
    and the money returned to them alone."""
    mine = data.get("player_id") == player_id
    if data.get("reason") == "operator":
        # why (a self-exclusion, a closed account) is told to the player stood up alone, as
        # the query API's player view does (``operator_reason``: docs/operations.md,
        # "Personal data")
        why = f" ({data.get('operator_reason')})" if mine else ""
        by = f"stood up by the operator{why}"
    else:
        rounds = data.get("rounds_sat_out")
        by = f"stood up by the server after {rounds} {'round' if rounds == 1 else 'rounds'} sat out"
    said = f"{by}: seat {data.get('seat')} is free"
    if mine:  # their money is theirs alone too (the player view's ``balance_returned``)
        back = money(int(data.get("balance_returned", 0)), currency)
        # At a table funded by the wallets the money goes back there; a single-player
        # table's is paid out (the platform's Withdraw), as the screen's own line says.
        to = "back in your wallet" if by_wallet else "paid out"
        said += f", {back} {currency} {to}" + (
            " · sit N to play again" if not seated else ""  # not once seated again
        )
    return ("You" if mine else str(data.get("player_id")), Text(said, "bold yellow"))


def bet_limits(rules: Mapping[str, Any], currency: str) -> str | None:
    """The table's bet limits, shown while bets are made (page 003: "The betting limits are
    displayed in the frame to the top left of the game table"; page 000: "The minimum bet is
    $1 USD and the maximum bet is $500 USD ... for the initial bet")."""
    low, high = rules.get("min_bet"), rules.get("max_bet")
    if not isinstance(low, int) or not isinstance(high, int):
        return None
    return f"from {money(low, currency)} to {money(high, currency)} {currency} a box"


def table_screen(
    table: StreamProjection,
    player_id: str,
    now: datetime | None = None,
    wallet: WalletView | None = None,
    stood_up: Sequence[Mapping[str, Any]] = (),
    *,
    cashing_out: int = 0,
) -> RenderableType:
    """The table for ``player_id``; with ``now``, the seconds left on the table's clock;
    with ``wallet``, the player's wallet (a table funded from it); ``stood_up``, the
    ``SeatLeft``s of players the operator stood up since the last round closed (in no round's
    recall, so not among the round's notes); ``cashing_out``, the money this table paid out to
    the wallet that the wallet has not received yet (shown on its way, not as vanished)."""
    view = table.view
    currency = view.currency or "USD"
    by_wallet = shared_table(table)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold cyan", no_wrap=True)
    grid.add_column()
    record = table.rounds.get(view.round)
    limits = bet_limits(view.rules or {}, currency)
    if limits is not None and (not view.round_open or view.phase == "betting"):
        grid.add_row("Bets", limits)  # page 003: "The betting limits are displayed in the frame"
    # A cancelled round dealt nothing and gave every bet back (its notes below say why).
    if record is not None and record.status not in ("betting", "cancelled"):
        _dealt(grid, record, table, player_id, currency)
    elif record is not None and record.status == "betting":
        for box in record.boxes:
            who = "you" if box.player_id == player_id else box.player_id
            grid.add_row(f"Box {box.box}", Text(f"bet {money(box.bet, currency)} ({who})"))
    account = table.accounts.get(player_id)
    seated = account is not None and account.seated
    if record is not None:
        for where, note in round_notes(record, player_id, currency, by_wallet, seated):
            grid.add_row(Text(where), note)
    for data in stood_up:
        who, said = _stood_up(data, player_id, currency, by_wallet, seated)
        grid.add_row(Text(who), said)
    taken = seats_line(table, player_id)
    if taken is not None:
        grid.add_row("Seats", taken)
    _you_rows(grid, table, player_id, account, currency)
    if wallet is not None and wallet.currency is not None:
        grid.add_row("Wallet", _wallet_line(wallet, wallet.currency, cashing_out))
    parts: list[RenderableType] = [grid, *_table_lines(view)]
    parts.append(Text(prompt_for(table, player_id), style="bold magenta"))
    return Panel(Group(*parts), title=_title(view, now), title_align="left")


def _title(view: TableView, now: datetime | None) -> str:
    """The table, its game and round; the phase and the clock's seconds left while open."""
    title = f"{view.stream_id} · {view.variant or 'not open'} · round {view.round}"
    if view.round_open:
        title += f" · {view.phase}"
        if view.deadline is not None and now is not None:
            left = max(0, math.ceil((view.deadline - now).total_seconds()))
            title += f" · {left} s left"
    return title


def _you_rows(
    grid: Table,
    table: StreamProjection,
    player_id: str,
    account: Account | None,
    currency: str,
) -> None:
    """The player's own lines: the seat and balance at the table, or how to sit down."""
    if account is None:
        grid.add_row("You", "not seated: sit N to sit down")
    elif not account.seated:
        grid.add_row("You", "not seated: sit N to sit down" + _paid_out(account, currency))
    else:
        seats = int((table.view.rules or {}).get("seats", 1))
        grid.add_row(
            "You",
            Text.assemble(
                f"seat {account.seat} · " if seats > 1 and account.seat is not None else "",
                # page 002's table: "the word "You" under which your total money will be
                # noted in yellow"
                (f"balance {money(account.available, currency)} {currency}", "yellow"),
                f" · in play {money(account.in_play, currency)}" if account.in_play else "",
            ),
        )
        if account.sitting_out:
            grid.add_row("You", Text(sitting_out_line(table, player_id), style="bold yellow"))


def _wallet_line(wallet: WalletView, currency: str, cashing_out: int) -> str:
    """The wallet's balance, and the money on its way to a table or from this one."""
    on_its_way = (
        f" · {money(wallet.in_transit, currency)} on its way to a table"
        if wallet.in_transit
        else ""
    )
    if cashing_out:
        on_its_way += f" · {money(cashing_out, currency)} on its way from this table"
    return f"{money(wallet.balance, currency)} {currency}{on_its_way}"


def _table_lines(view: TableView) -> list[Text]:
    """Under the grid: the operator's suspension, the shoe's progress."""
    lines = []
    if view.suspended is not None:
        lines.append(
            Text(
                f"suspended by the operator: {view.suspended.reason} · no new bets until it "
                "reopens; a round under way is played to the end",
                style="bold red",
            )
        )
    if view.shoe is not None:
        lines.append(
            Text(
                f"shoe {view.shoe.shoe}: {view.shoe.cards_dealt} of {view.shoe.cards} cards dealt",
                style="dim",
            )
        )
    return lines


def rounds_before_seat_freed(table: StreamProjection, player_id: str) -> int | None:
    """While ``player_id`` sits out at a table whose rules free such a seat, the rounds still
    to be dealt without them before it is (0: when the round in play ends); else None."""
    account = table.accounts.get(player_id)
    limit = table.seat_release()
    if account is None or not account.sitting_out or limit is None:
        return None
    if account.rounds_sat_out is None:
        return None
    return max(limit - account.rounds_sat_out, 0)


def sitting_out_line(table: StreamProjection, player_id: str) -> str:
    """What a player left out by the clock is told while they sit out: that rounds are dealt
    without them, what brings them back and, where the rules free the seat of a player who
    sits out, how many more rounds dealt without them free theirs."""
    line = (
        "sitting out: rounds are dealt without you · bet or pass while betting is open to play "
        "again"
    )
    left = rounds_before_seat_freed(table, player_id)
    if left == 0:
        line += " · your seat is freed when this round ends"
    elif left is not None:
        rounds = "1 more round" if left == 1 else f"{left} more rounds"
        line += f" · {rounds} dealt without you {'frees' if left == 1 else 'free'} your seat"
    return line


def seats_line(table: StreamProjection, player_id: str) -> Text | None:
    """At a table of several seats, who sits where, each player who sits out marked (with
    the rounds left before the seat is freed, where the rules free it)."""
    if not shared_table(table):
        return None
    seated = sorted(
        (a for a in table.accounts.values() if a.seated and a.seat is not None),
        key=lambda a: (a.seat or 0, a.player_id),
    )
    if not seated:
        return None
    parts: list[Text] = []
    for account in seated:
        who = "you" if account.player_id == player_id else account.player_id
        part = Text(f"{account.seat} {who}")
        if account.sitting_out:
            left = rounds_before_seat_freed(table, account.player_id)
            mark = "sits out"
            if left == 0:
                mark += ", seat freed as this round ends"
            elif left is not None:
                mark += f", seat freed after {left} more {'round' if left == 1 else 'rounds'}"
            part.append(f" ({mark})", style="yellow")
        parts.append(part)
    return Text(" · ").join(parts)


def _dealt(
    grid: Table, record: RoundRecord, table: StreamProjection, player_id: str, currency: str
) -> None:
    dealer = record.dealer
    if None in dealer.cards:  # the hole card face down: what the dealer shows
        total = f"shows {dealer.upcard[0] if dealer.upcard else '?'}".replace("T", "10")
        if dealer.peeked:  # the pages: "the dealer will check for blackjack immediately"
            total += ", checked: no blackjack"
    elif dealer.blackjack:
        total = "blackjack"
    else:
        total = _total(dealer.total, dealer.soft)
        if dealer.total > 21:  # said as a player's hand's is
            total += " bust"
    grid.add_row("Dealer", Text.assemble(cards(dealer.cards), "  ", (total, "bold")))
    turn = table.view.active
    decided = server_decisions(record)
    answering = insurance_asked(table, player_id)
    for box in record.boxes:
        who = "" if box.player_id == player_id else f" ({box.player_id})"
        grid.add_row(Text(f"Box {box.box}{who}"), f"bet {money(box.bet, currency)}")
        for index, hand in enumerate(box.hands):
            line = _hand_line(hand, currency, decided.get((box.player_id, box.box, index)))
            if hand.stake != box.bet:  # doubled: the box's line still reads the first bet
                line = Text(f"stake {money(hand.stake, currency)}  ", "dim") + line
            if (
                table.view.phase == "playing"
                and turn is not None
                and (turn.box, turn.hand) == (box.box, index)
            ):
                line.append(
                    "  ◀ " + ("your turn" if turn.player_id == player_id else "turn"),
                    style="bold magenta",
                )
            grid.add_row(f"  hand {index + 1}" if len(box.hands) > 1 else "", line)
        declined = decided.get((box.player_id, box.box, None))
        if declined is not None:
            grid.add_row("", Text(declined, style="bold yellow"))
        elif box.insurance is not None:
            asked = box.box == answering  # the box the next i or n goes to
            declines = asked and declined_by_a_move(table, player_id)
            grid.add_row("", _insurance_line(box.insurance, asked, currency, declines))
    for message in record.messages:
        grid.add_row(f"Box {message.box}", Text(message.message, style="italic"))


def _insurance_line(
    insurance: InsuranceView, mine: bool, currency: str, declined_by_moving: bool = False
) -> Text:
    stake = money(insurance.stake, currency)
    if insurance.voided and insurance.status in ("taken", "settled"):  # its stake came back
        result = "taken"  # and a payout settled at the peek was taken back
        if insurance.status == "settled" and insurance.won:
            result = "won," + paid_words(insurance.stake, insurance.payout or 0, currency)
        elif insurance.status == "settled":
            result = "lost"
        return Text(f"insurance {stake} {result}, voided", style="dim")
    if insurance.status == "offered":
        said = "insurance offered"
        if mine:
            said += f": {_INSURANCE_KEYS}"
        if declined_by_moving:  # page 002: "you may simply click on one of the other buttons"
            said += ", or decline by playing"
        return Text(said, "bold magenta")
    if insurance.status == "settled" and insurance.won:
        paid = paid_words(insurance.stake, insurance.payout or 0, currency)
        return Text(f"insurance {stake} won,{paid}", "green")
    if insurance.status == "settled":
        return Text(f"insurance {stake} lost", style="yellow")
    return Text(f"insurance {insurance.status}" + (f" {stake}" if insurance.stake else ""), "dim")


def _insurance_open(table: StreamProjection, player_id: str) -> bool:
    return insurance_asked(table, player_id) is not None


def _insurance_offered(table: StreamProjection, player_id: str) -> list[int]:
    """The player's boxes whose insurance decision is open, in the round's order."""
    record = table.rounds.get(table.view.round)
    if record is None:
        return []
    return [
        box.box
        for box in record.boxes
        if box.player_id == player_id and box.insurance and box.insurance.status == "offered"
    ]


def insurance_asked(table: StreamProjection, player_id: str) -> int | None:
    """The box the player's next ``i`` or ``n`` answers: the first still offered insurance
    (``moves``, as it sends them), or None."""
    offered = _insurance_offered(table, player_id)
    return offered[0] if offered else None


def declined_by_a_move(table: StreamProjection, player_id: str) -> bool:
    """Whether a move typed now declines the player's insurance and is played (page 002,
    ``move_declines_insurance``): only on the last insurance decision open, and on the box
    whose hand plays first (``decisions/insurance.py``); else the table refuses the move
    (``not_your_turn``), and the player answers i or n and plays when the turn comes."""
    view = table.view
    record = table.rounds.get(view.round)
    if record is None or not preset_term(view.rules or {}, "move_declines_insurance"):
        return False
    open_ = [b for b in record.boxes if b.insurance is not None and b.insurance.status == "offered"]
    if len(open_) != 1 or open_[0].player_id != player_id:
        return False
    first = next((b for b in sorted(record.boxes, key=lambda b: b.box) if _plays(b)), None)
    return first is not None and first.box == open_[0].box


def _plays(box: BoxView) -> bool:
    """The box's first hand is dealt and waits for a decision (not a blackjack)."""
    if not box.hands:
        return False
    hand = box.hands[0]
    natural = len(hand.cards) == 2 and hand.total == 21 and not hand.split
    return hand.outcome is None and not natural


def waits_on(table: StreamProjection, player_id: str) -> str | None:
    """What the table's running clock waits for from ``player_id``, and what the server
    does at the deadline in their place (``None``: it waits for nothing of theirs)."""
    view = table.view
    account = table.accounts.get(player_id)
    if not view.round_open or view.deadline is None or account is None or not account.seated:
        return None
    record = table.rounds.get(view.round)
    if view.phase == "betting" and record is not None:
        if _chose(table, player_id) is not None:
            return None
        if any(box.player_id == player_id for box in record.boxes):
            return "to deal or pass: then you are dealt in"
        return "to bet: then you are left out of this round"
    if view.phase == "insurance" and _insurance_open(table, player_id):
        return "to answer insurance: then it is declined for you"
    turn = view.active
    if view.phase == "playing" and turn is not None and turn.player_id == player_id:
        return "for your move: then the server stands the hand"
    return None


def _chose(table: StreamProjection, player_id: str) -> str | None:
    """The player's Deal or Pass in the round's betting (``DealRequested``, ``PlayerPassed``),
    after which their bets are closed until the round is dealt and settled."""
    record = table.rounds.get(table.view.round)
    if record is None:
        return None
    for entry in record.log:
        if (
            entry.event in ("DealRequested", "PlayerPassed")
            and entry.data.get("player_id") == player_id
        ):
            return entry.event
    return None


def clock_reminder(table: StreamProjection, player_id: str, now: datetime) -> str | None:
    """One line for a player the clock waits on: the screen's "15 s left" is the time when
    it was drawn, and it is drawn again only when the table changes."""
    wanted = waits_on(table, player_id)
    deadline = table.view.deadline
    if wanted is None or deadline is None or now >= deadline:
        return None
    return f"{math.ceil((deadline - now).total_seconds())} s left {wanted}"


_INSURANCE_KEYS = "i (take) / n (no)"

_WORDS = {"hit": "h", "stand": "s", "double": "d", "split": "p", "surrender": "r"}


def _no_box_in_the_round(table: StreamProjection, player_id: str) -> bool:
    """Whether a round is dealt that the player has no box in (passed, left out, or sat down
    after the bets closed: page 002, a player who joins during a round "must wait until the
    round is over")."""
    view = table.view
    record = table.rounds.get(view.round) if view.round_open else None
    if record is None or view.phase == "betting" or not record.boxes:
        return False
    return all(box.player_id != player_id for box in record.boxes)


def prompt_for(table: StreamProjection, player_id: str) -> str:
    """What the player may type now, from the table's view."""
    view = table.view
    if not view.opened:
        return "the table is not open"
    account = table.accounts.get(player_id)
    if account is None or not account.seated:
        if view.suspended is not None:
            return "the table is suspended: no new players · ? help, q quit"
        return "sit N to sit down at seat N · ? help, q quit"
    turn = view.active
    # one who sat down after the bets closed is told now, not by a bet refused (so is one who
    # passed or was left out)
    later = " · you play from the next round" if _no_box_in_the_round(table, player_id) else ""
    if view.round_open and view.phase == "playing" and turn is not None:
        if turn.player_id != player_id:
            return f"waiting for {turn.player_id}{later}"
        actions = turn.actions or list(_WORDS)
        return "your move: " + "  ".join(f"{action} ({_WORDS[action]})" for action in actions)
    if view.round_open and view.phase == "insurance":
        offered = _insurance_offered(table, player_id)
        if offered:
            # several boxes asked: each answer goes to the first (three at page 003's table)
            several = len(offered) > 1 or boxes_per_seat(table) > 1
            asked = f"insurance on box {offered[0]}?" if several else "insurance?"
            if declined_by_a_move(table, player_id):  # page 002
                return f"{asked} {_INSURANCE_KEYS}, or decline by playing: h, s, d ..."
            if preset_term(view.rules or {}, "move_declines_insurance"):  # not this box yet
                return f"{asked} {_INSURANCE_KEYS}, then play when your turn comes"
            return f"{asked} {_INSURANCE_KEYS}"
        return f"waiting for the insurance answers{later}"  # answered, none offered, no bet
    if view.round_open and view.phase == "dealer":
        return f"the dealer plays{later}"
    chose = _chose(table, player_id) if view.round_open and view.phase == "betting" else None
    if chose is not None:  # a shared table deals when every player has chosen, or at its clock
        said = "dealt in" if chose == "DealRequested" else "you pass this round"
        return f"{said}: the cards come when the others deal or pass, or at the deadline"
    if view.suspended is not None:
        if view.round_open:  # bets already on the layout may still be dealt or taken back
            return "the table is suspended · deal, clear · withdraw AMOUNT · ? help, q quit"
        return "the table is suspended · withdraw AMOUNT, leave · ? help, q quit"
    shared = shared_table(table)  # funded from the wallet: no Deposit
    if account.available == 0 and account.in_play == 0:  # a bet, a rebet, a withdraw: refused
        pay_in = "buyin AMOUNT" if shared else "deposit AMOUNT"
        return f"no money at the table: {pay_in} to bet · leave · ? help, q quit"
    bet = "bet AMOUNT"
    per_seat = boxes_per_seat(table)
    if per_seat > 1:  # page 003's "up to three hands": the boxes a bet may go on
        first = (account.seat or 0) * per_seat
        bet += f" [box {first}-{first + per_seat - 1}]"
    if view.round_open and account.in_play:  # chips on the layout may be taken back
        bet += ", remove"
    bet += _rebets(view.rules or {}, account, _last_dealt_bets(table, player_id))
    # Deal once the player's chips are down: with none, the table refuses it (no_bets).
    deal = ", deal" if view.round_open and account.in_play else ""
    if shared:
        return f"{bet}{deal}, pass · buyin AMOUNT, withdraw AMOUNT · seat N, leave · ? help, q quit"
    return f"{bet}{deal} · deposit AMOUNT, withdraw AMOUNT · ? help, q quit"


def _paid_out(account: Account, currency: str) -> str:
    """What the table paid the player in all, every seat's (sat again after a leave):
    withdrawals and the money paid out on leaving, each said."""
    out = account.withdrawn + account.cashed_out
    if not out:
        return ""
    to = "cashed out to your wallet" if account.funded_by_wallet else "paid out"
    parts = [
        f"{money(amount, currency)} {how}"
        for amount, how in ((account.withdrawn, "withdrawn"), (account.cashed_out, "on leaving"))
        if amount
    ]
    return f" · {to} at this table in all: {money(out, currency)} {currency} ({', '.join(parts)})"


def _rebets(rules: dict[str, Any], account: Account, last: list[int] | None) -> str:
    """The rebets the table offers (rebet2: page 000's DOUBLE BET, page 001's REBET X 2), once
    the player has played a round here: before it there is no previous bet (page 003: "for
    your first bet, the Repeat control is disabled"), and none with chips on the layout (the
    table refuses a rebet then); nor one the balance cannot cover or that takes a box past the
    maximum bet, where the last round's bets are known here (``last``: the table refused each
    one offered, ``insufficient_funds`` or ``bet_above_maximum``). (A player who left and sat
    down again has none either; the read model does not tell, and the table says so.)"""
    if not account.rounds or account.in_play:
        return ""
    multipliers = sorted(int(m) for m in rules.get("rebet_multipliers", [1]))
    highest = rules.get("max_bet")
    if last:
        multipliers = [
            m
            for m in multipliers
            if sum(last) * m <= account.available
            and (not isinstance(highest, int) or max(last) * m <= highest)
        ]
    return "".join(", rebet" if m == 1 else f", rebet{m}" for m in multipliers)


def _last_dealt_bets(table: StreamProjection, player_id: str) -> list[int] | None:
    """Each box's bet of the player in the last round dealt here they had a box in (what a
    rebet repeats); None when the rounds held here hold none."""
    for number in sorted(table.rounds, reverse=True):
        record = table.rounds[number]
        if record.status in ("betting", "cancelled"):
            continue
        mine = [box.bet for box in record.boxes if box.player_id == player_id]
        if mine:
            return mine
    return None


def rules_screen(rules: Rules, returns: Returns) -> RenderableType:
    """The table's rules as its players read them (``rules_sheet``)."""
    sheet = Table.grid(padding=(0, 1))  # a rule's wrapped lines under its text, not its dash
    sheet.add_column(no_wrap=True)
    sheet.add_column()
    for line in rules_sheet(rules, returns):
        sheet.add_row("-", Text(line))
    return Panel(sheet, title=f"{rules.name}: the rules", title_align="left")


def history_screen(table: StreamProjection, player_id: str, rounds: int) -> RenderableType:
    """The player's last ``rounds`` rounds at this table, newest first (game recall, as the
    query API's betting history has them): each game cycle's id and time, the cards of each of
    the player's hands (by box when there are several; splits, doubles, surrenders, insurance
    and the server's decisions marked) and the dealer's, what was wagered and paid, the balance
    before and after; a round not finished says so, with the money it holds."""
    currency = table.view.currency or "USD"
    mine = sorted(
        (line for (_, player), line in table.players.items() if player == player_id),
        key=lambda line: line.round,
        reverse=True,
    )[:rounds]
    if not mine:
        return Text("no rounds played here yet", style="dim")
    count = "round" if len(mine) == 1 else f"{len(mine)} rounds"
    # Text, not a str: rich reads square brackets in a str as markup, and a player id may
    # hold them ("[/]x" ended the session on a MarkupError)
    title = Text(f"{player_id} at {table.view.stream_id}, last {count} (times in UTC)")
    rows: list[_RecallRow] = []
    for line in mine:
        record = table.rounds.get(line.round)
        decided = server_decisions(record) if record else {}
        boxes = [box for box in record.boxes if box.player_id == player_id] if record else []
        lines: list[Text] = _interruptions(record, player_id, currency) if record else []
        # the server's decisions for no one box (dealt in; left out, for a player whose bet
        # it gave back, the only ones left out with a line here): a box's own are on it
        lines += [
            Text(said, style="bold yellow")
            for (player, box_index, _), said in decided.items()
            if player == player_id and box_index is None
        ]
        for box in boxes:
            label = f"box {box.box}  " if len(boxes) > 1 else ""
            for index, hand in enumerate(box.hands):
                server = decided.get((player_id, box.box, index))
                stake = Text(f"stake {money(hand.stake, currency)}  ", "dim")
                shown = _hand_line(hand, currency, server, split_marked=True)
                lines.append(Text(label) + stake + shown)
            declined = decided.get((player_id, box.box, None))
            if declined is not None:
                lines.append(Text(label) + Text(declined, style="bold yellow"))
            elif box.insurance is not None and box.insurance.status != "offered":
                lines.append(Text(label) + _insurance_line(box.insurance, True, currency))
        finished = record is None or record.status in ("settled", "cancelled", "voided")
        rows.append(
            _RecallRow(
                f"{table.view.stream_id}:{line.round}",
                _when(line.started_at, record),
                Text("\n").join(lines) or Text("no hand dealt", style="dim"),
                cards(record.dealer.cards) if record else Text("-"),
                money(line.wagered, currency) if finished else f"in play {_held(boxes, currency)}",
                money(line.paid, currency) if finished else _paid_so_far(line.paid, currency),
                _balance_line(line, currency),
            )
        )
    return _Recall(title, rows)


def _balance_line(line: RoundPlayer, currency: str) -> str:
    """The balance before and after a round, with the money the player paid in or took out
    at the table while it played, so that before - wagered + paid + in - out = after reads off
    the line (a review: a deposit and a withdrawal during a round left 89.50 - 2.00 + 4.00
    reading 90.39, and a buy-in that landed mid-round 10.00 out)."""
    said = f"{money(line.balance_before, currency)} -> {money(line.balance_after, currency)}"
    moved = [
        f"{what} {money(amount, currency)}"
        for what, amount in (("paid in", line.deposited), ("taken out", line.withdrawn))
        if amount
    ]
    return f"{said} ({', '.join(moved)})" if moved else said


def _paid_so_far(paid: int, currency: str) -> str:
    """What a round still under way has paid (a surrender or a bust settled at once)."""
    return f"{money(paid, currency)} so far" if paid else "-"


@dataclass(frozen=True)
class _RecallRow:
    cycle: str
    when: Text
    hands: Text
    dealer: Text
    wagered: str
    paid: str
    balance: str


@dataclass(frozen=True)
class _Recall:
    """The history, drawn for the width it is given: a table of a row per game cycle where
    its seven columns fit, else a block per cycle. At 80 columns the table squeezed each
    column to 9: the date was cut to "2026-12-…" and a hand took five lines."""

    title: Text
    rows: list[_RecallRow]

    TABLE_WIDTH = 150
    """Below this many columns the cycles are drawn as blocks (the table's columns, with a
    hand of a split, a double and a payout on one line, take about 150)."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if options.max_width >= self.TABLE_WIDTH:
            yield self._table()
            return
        yield self.title
        for row in self.rows:
            when = Text(" ").join(row.when.split("\n"))
            yield Text.assemble("\n", (row.cycle, "bold"), "  ", when)
            yield Padding(row.hands, (0, 0, 0, 2))
            yield Text.assemble("  dealer ", row.dealer)
            wagered = row.wagered if row.wagered.startswith("in play") else f"wagered {row.wagered}"
            paid = "" if row.paid == "-" else f" · paid {row.paid}"
            yield Text(f"  {wagered}{paid} · balance {row.balance}")

    def _table(self) -> Table:
        grid = Table(title=self.title)
        grid.add_column("game cycle", justify="right")
        grid.add_column("when (UTC)")
        grid.add_column("your hands")
        grid.add_column("dealer")
        grid.add_column("wagered", justify="right")
        grid.add_column("paid", justify="right")
        grid.add_column("balance")
        for row in self.rows:
            grid.add_row(
                row.cycle, row.when, row.hands, row.dealer, row.wagered, row.paid, row.balance
            )
        return grid


def _interruptions(record: RoundRecord, player_id: str, currency: str) -> list[Text]:
    """GLI-19's interrupted games in the player's recall: when the player was disconnected
    during the round and came back, and what the server did meanwhile (a bet given back);
    the operator suspending or resuming the table while the round played; and the service
    itself interrupted and resumed (``RoundResumed``), seen by every player of the round."""
    lines: list[Text] = []
    for entry in record.log:
        data = entry.data
        if entry.event == "RoundResumed":
            said = resumed_line(data.get("last_event_at"), entry.at, data.get("deadline"))
            lines.append(Text(said, "red"))
            continue
        if entry.event == "RoundVoided":  # the operator's name is the casino's, not shown
            why = f": {data['reason']}" if data.get("reason") else ""
            lines.append(Text(f"voided for a malfunction, every wager back{why}", "red"))
            continue
        if entry.event in ("TableSuspended", "TableResumed"):
            what = "suspended" if entry.event == "TableSuspended" else "resumed"
            why = f": {data['reason']}" if data.get("reason") else ""
            lines.append(Text(f"table {what} at {entry.at:%H:%M:%S} by the operator{why}", "red"))
            continue
        if data.get("player_id") != player_id:
            continue
        if entry.event == "PlayerDisconnected":
            lines.append(Text(f"disconnected at {entry.at:%H:%M:%S}", "bold yellow"))
        elif entry.event == "PlayerReconnected":
            lines.append(
                Text(f"back at {entry.at:%H:%M:%S}: the round went on as it was left", "yellow")
            )
        elif entry.event == "BetRefunded" and data.get("reason") in _RETURNED_BECAUSE:
            if data.get("reason") == "passed":  # the player's own choice, no interruption
                continue
            amount = money(int(data.get("amount", 0)), currency)
            reason = str(data.get("reason"))
            by = " by the server" if reason != "left" else ""  # leaving is the player's own
            lines.append(
                Text(f"bet of {amount} returned{by}: {_RETURNED_BECAUSE[reason]}", "yellow")
            )
    return lines


def resumed_line(last_event_at: object, resumed_at: datetime, deadline: object = None) -> str:
    """A ``RoundResumed`` in words: the service stopped after the table's last event and the
    round went on when the next command was taken, its clock started again at a table of one
    seat on a clock. The marker's time is that command's, not the restart's (a review read
    "resumed at" as the service back, an outage twice as long as it was)."""
    resumed = (
        f"resumed with the next move, at {resumed_at:%Y-%m-%d %H:%M:%S}; the round continued "
        "as it was"
    )
    if isinstance(deadline, str):
        restarted = datetime.fromisoformat(deadline)
        resumed += f", its clock started again (to {restarted:%H:%M:%S})"
    if not isinstance(last_event_at, str):
        return f"the service was interrupted and {resumed}"
    stopped = datetime.fromisoformat(last_event_at)
    return f"the service was interrupted after {stopped:%Y-%m-%d %H:%M:%S} and {resumed}"


def _when(started_at: datetime, record: RoundRecord | None) -> Text:
    """When the game cycle started and ended (UTC), or that it has not ended: GLI-19's recall
    gives each game's date and time."""
    started = record.opened_at if record is not None else started_at
    text = Text(f"{started:%Y-%m-%d %H:%M:%S}")
    if record is None:
        return text
    if record.closed_at is not None:
        ended = record.closed_at
        same_day = ended.date() == started.date()
        text.append(f"\nto {ended:%H:%M:%S}" if same_day else f"\nto {ended:%Y-%m-%d %H:%M:%S}")
        if record.status in ("cancelled", "voided"):
            text.append(f" ({record.status})", style="dim")
    else:
        text.append(f"\nnot finished ({record.status})", style="bold yellow")
    return text


def _held(boxes: list[BoxView], currency: str) -> str:
    """The money a round under way holds of the player's, still theirs: the bets on the layout,
    the stake of every hand not yet settled (doubles and splits included) and an insurance
    taken and not yet settled."""
    held = 0
    for box in boxes:
        if not box.hands:
            held += box.bet
        held += sum(hand.stake for hand in box.hands if hand.outcome is None)
        if box.insurance is not None and box.insurance.status == "taken":
            held += box.insurance.stake
    return money(held, currency)


def result_line(command: str, result: CommandResult, currency: str = "USD") -> Text:
    if result.status == "accepted":
        return Text(f"{command}: accepted", style="green")
    reason = result.rejection
    code = reason.code if reason is not None else "rejected"
    message = reason.message if reason is not None else ""
    if code in _MONEY_REFUSALS:
        message = in_money(message, currency)
    return Text(f"{command} refused ({code}): {message}", style="bold red")


_MONEY_REFUSALS = frozenset(
    {
        "bet_above_maximum",
        "bet_below_minimum",
        "insufficient_funds",
        "balance_limit",
        "invalid_amount",
    }
)
"""The refusals whose messages state amounts, in minor units as the commands carry them."""

_AMOUNT_IN_MESSAGE = re.compile(r"(?<!box )(?<!seat )\b[0-9]+\b(?: minor units)?", re.ASCII)


def in_money(message: str, currency: str) -> str:
    """A refusal's amounts as the player typed them, in the currency's units: the table says
    "the maximum bet is 50000" (minor units, the command's), and a player who typed "bet
    501" read a maximum of 50,000. A box or seat number is left as it is."""
    return _AMOUNT_IN_MESSAGE.sub(
        lambda found: money(int(found.group(0).split()[0]), currency), message
    )
