"""The table as one player sees it, drawn with rich: pure, no I/O (the caller prints it).

Everything comes from the table's public view (the read model's fold): the dealer's hole card
is face down until revealed, the shoe is a count of cards dealt.
"""

from __future__ import annotations

import math
from datetime import datetime

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from blackjack.audit.replay import money
from blackjack.domain.rules import Rules
from blackjack.messages.envelope import CommandResult
from blackjack.projections.projector import HandView, RoundRecord, StreamProjection
from blackjack.rules_sheet import Returns, rules_sheet

SUITS = {"S": "♠", "H": "♥", "D": "♦", "C": "♣"}
RED = {"H", "D"}


def card(code: str | None) -> Text:
    if code is None:
        return Text("▒▒", style="bold blue")
    rank = "10" if code[0] == "T" else code[0]
    return Text(f"{rank}{SUITS[code[1]]}", style="bold red" if code[1] in RED else "bold")


def cards(codes: list[str] | list[str | None]) -> Text:
    return Text(" ").join(card(code) for code in codes) if codes else Text("-")


def _total(total: int, soft: bool) -> str:
    return f"{'soft ' if soft and total <= 21 else ''}{total}" if total else ""


def _hand_line(hand: HandView, currency: str) -> Text:
    line = Text.assemble(cards(hand.cards), "  ", (_total(hand.total, hand.soft), "bold"))
    marks = [
        word for word, on in (("doubled", hand.doubled), ("surrendered", hand.surrendered)) if on
    ]
    if marks:
        line.append(f"  ({', '.join(marks)})", style="dim")
    if hand.outcome is not None:
        paid = f" pays {money(hand.payout, currency)}" if hand.payout else ""
        line.append(f"  {hand.outcome}{paid}", style="green" if hand.payout else "yellow")
    return line


def table_screen(
    table: StreamProjection, player_id: str, now: datetime | None = None
) -> RenderableType:
    """The table for ``player_id``; with ``now``, the seconds left on the table's clock."""
    view = table.view
    currency = view.currency or "USD"
    title = f"{view.stream_id} · {view.variant or 'not open'} · round {view.round}"
    if view.round_open:
        title += f" · {view.phase}"
        if view.deadline is not None and now is not None:
            left = max(0, math.ceil((view.deadline - now).total_seconds()))
            title += f" · {left} s left"
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold cyan", no_wrap=True)
    grid.add_column()
    record = table.rounds.get(view.round)
    if record is not None and record.status != "betting":
        _dealt(grid, record, table, player_id, currency)
    elif record is not None:
        for box in record.boxes:
            who = "you" if box.player_id == player_id else box.player_id
            grid.add_row(f"Box {box.box}", f"bet {money(box.bet, currency)} ({who})")
    account = table.accounts.get(player_id)
    if account is not None:
        grid.add_row(
            "You",
            f"balance {money(account.available, currency)} {currency}"
            + (f" · in play {money(account.in_play, currency)}" if account.in_play else ""),
        )
    else:
        grid.add_row("You", "not seated: deposit or sit down first")
    parts: list[RenderableType] = [grid]
    if view.suspended is not None:
        parts.append(
            Text(
                f"suspended by the operator: {view.suspended.reason} · no new bets until it "
                "reopens; a round under way is played to the end",
                style="bold red",
            )
        )
    if view.shoe is not None:
        parts.append(
            Text(
                f"shoe {view.shoe.shoe}: {view.shoe.cards_dealt} of {view.shoe.cards} cards dealt",
                style="dim",
            )
        )
    parts.append(Text(prompt_for(table, player_id), style="bold magenta"))
    return Panel(Group(*parts), title=title, title_align="left")


def _dealt(
    grid: Table, record: RoundRecord, table: StreamProjection, player_id: str, currency: str
) -> None:
    dealer = record.dealer
    if None in dealer.cards:  # the hole card face down: what the dealer shows
        total = f"shows {dealer.upcard[0] if dealer.upcard else '?'}".replace("T", "10")
    elif dealer.blackjack:
        total = "blackjack"
    else:
        total = _total(dealer.total, dealer.soft)
    grid.add_row("Dealer", Text.assemble(cards(dealer.cards), "  ", (total, "bold")))
    turn = table.view.active
    for box in record.boxes:
        who = "" if box.player_id == player_id else f" ({box.player_id})"
        grid.add_row(f"Box {box.box}{who}", f"bet {money(box.bet, currency)}")
        for index, hand in enumerate(box.hands):
            line = _hand_line(hand, currency)
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
        if box.insurance is not None and box.insurance.status != "offered":
            grid.add_row("", Text(f"insurance {box.insurance.status}", style="dim"))
    for message in record.messages:
        grid.add_row(f"Box {message.box}", Text(message.message, style="italic"))


_WORDS = {"hit": "h", "stand": "s", "double": "d", "split": "p", "surrender": "r"}


def prompt_for(table: StreamProjection, player_id: str) -> str:
    """What the player may type now, from the table's view."""
    view = table.view
    if not view.opened:
        return "the table is not open"
    turn = view.active
    if view.round_open and view.phase == "playing" and turn is not None:
        if turn.player_id != player_id:
            return f"waiting for {turn.player_id}"
        actions = turn.actions or list(_WORDS)
        return "your move: " + "  ".join(f"{action} ({_WORDS[action]})" for action in actions)
    if view.round_open and view.phase == "insurance":
        return "insurance? i (take) / n (no)"
    if view.round_open and view.phase == "dealer":
        return "the dealer plays"
    if view.suspended is not None:
        return "the table is suspended · withdraw AMOUNT, leave · ? help, q quit"
    return "bet AMOUNT, rebet, deal · deposit AMOUNT, withdraw AMOUNT · ? help, q quit"


def rules_screen(rules: Rules, returns: Returns) -> RenderableType:
    """The table's rules as its players read them (``rules_sheet``)."""
    sheet = Text("\n").join(Text(f"- {line}") for line in rules_sheet(rules, returns))
    return Panel(sheet, title=f"{rules.name}: the rules", title_align="left")


def history_screen(table: StreamProjection, player_id: str, rounds: int) -> RenderableType:
    """The player's last ``rounds`` rounds at this table, newest first (game recall, as the
    query API's betting history has them): the cards of each of the player's hands and the
    dealer's, what was wagered and paid, the balance before and after."""
    currency = table.view.currency or "USD"
    mine = sorted(
        (line for (_, player), line in table.players.items() if player == player_id),
        key=lambda line: line.round,
        reverse=True,
    )[:rounds]
    if not mine:
        return Text("no rounds played here yet", style="dim")
    grid = Table(title=f"{player_id} at {table.view.stream_id}, last {len(mine)} rounds")
    grid.add_column("round", justify="right")
    grid.add_column("your hands")
    grid.add_column("dealer")
    grid.add_column("wagered", justify="right")
    grid.add_column("paid", justify="right")
    grid.add_column("balance")
    for line in mine:
        record = table.rounds.get(line.round)
        hands = Text("\n").join(
            _hand_line(hand, currency)
            for box in (record.boxes if record else [])
            if box.player_id == player_id
            for hand in box.hands
        )
        dealer = cards(record.dealer.cards) if record else Text("-")
        grid.add_row(
            str(line.round),
            hands or Text("no hand dealt", style="dim"),
            dealer,
            money(line.wagered, currency),
            money(line.paid, currency),
            f"{money(line.balance_before, currency)} -> {money(line.balance_after, currency)}",
        )
    return grid


def result_line(command: str, result: CommandResult) -> Text:
    if result.status == "accepted":
        return Text(f"{command}: accepted", style="green")
    reason = result.rejection
    code = reason.code if reason is not None else "rejected"
    message = reason.message if reason is not None else ""
    return Text(f"{command} refused ({code}): {message}", style="bold red")
