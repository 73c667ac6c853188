"""``blackjack replay ROUND_ID``: one game cycle rebuilt by the engine, told readably, checked.

The whole table is replayed (the round's starting balances and shoe come from the events
before it); the verdict counts the findings up to the round's last event and those about the
round's shoe (its reveal may come later), so a later round's trouble does not fail this one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from blackjack.audit.replay import TableReplayer
from blackjack.audit.replayed import Finding, RoundReplay, Settlement, ShoeCheck, StreamReplay
from blackjack.audit.words import cards_text
from blackjack.domain import events as ev
from blackjack.domain.currencies import money
from blackjack.domain.state import TableState
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import WireEnvelope


@dataclass
class RoundVerdict:
    round_id: str
    found: bool
    replay: RoundReplay | None = None
    shoe: ShoeCheck | None = None
    findings: list[Finding] = field(default_factory=list)
    stopped: str | None = None
    """why the round could not be replayed to its end"""
    state: TableState | None = None

    @property
    def ok(self) -> bool:
        return self.found and not self.findings and self.stopped is None


def replay_round(
    wires: Iterable[WireEnvelope],
    number: int,
    seal: ShoeSeal | None,
    stream_id: str,
    *,
    complete: bool = True,
) -> RoundVerdict:
    """``complete``: ``wires`` is the log itself, not a read model that may lag it."""
    replayer = RoundReplayer(number, seal, stream_id, complete=complete)
    for envelope in wires:
        replayer.feed(envelope)
    return replayer.finish()


class RoundReplayer:
    """``replay_round`` fed one event at a time (``blackjack replay`` feeds it a page of the
    store at a time): the table's other rounds are replayed and let go, not kept."""

    def __init__(
        self, number: int, seal: ShoeSeal | None, stream_id: str, *, complete: bool = True
    ) -> None:
        self.number = number
        self.stream_id = stream_id
        self.table = TableReplayer(stream_id, seal, complete, keep=lambda n: n == number)
        self.last: int | None = None
        """the round's last event"""
        self.retired_at: dict[int, int] = {}
        """each shoe's reveal (``ShoeRetired``), by sequence"""

    def feed(self, envelope: WireEnvelope) -> None:
        data = envelope.data
        if isinstance(data, ev.RoundEvent) and data.round == self.number:
            self.last = max(self.last or 0, envelope.sequence)
        if isinstance(data, ev.ShoeRetired):
            self.retired_at[data.shoe] = envelope.sequence
        self.table.feed(envelope)

    def finish(self) -> RoundVerdict:
        stream: StreamReplay = self.table.finish()
        verdict = RoundVerdict(f"{self.stream_id}:{self.number}", found=False, state=stream.state)
        last = self.last
        if last is None:
            return verdict
        verdict.found = True
        replay = stream.rounds.get(self.number)
        verdict.replay = replay
        if replay is None or (stream.stopped is not None and stream.events < last):
            verdict.stopped = stream.stopped or "the round could not be replayed"
        shoe = replay.shoe if replay is not None else None
        verdict.shoe = stream.shoes.get(shoe) if shoe is not None else None
        reveal = self.retired_at.get(shoe) if shoe is not None else None
        verdict.findings = [
            f
            for f in stream.findings
            if f.sequence is None or f.sequence <= last or f.sequence == reveal
        ]
        return verdict


def render(verdict: RoundVerdict) -> str:
    if not verdict.found:
        return f"No round {verdict.round_id} in the events read."
    replay = verdict.replay
    lines: list[str] = []
    if replay is None:
        lines.append(f"Round {verdict.round_id}: not replayed ({verdict.stopped})")
        lines += [f"  ! {f}" for f in verdict.findings]
        return "\n".join(lines)
    status = replay.status if not verdict.stopped else f"{replay.status} as far as replayed"
    lines.append(f"Round {verdict.round_id} - {replay.variant} - {replay.currency} - {status}")
    lines.append(_shoe_line(replay.shoe, verdict.shoe))
    lines.append("")
    for line in replay.lines:
        at = _clock(line.at)
        lines.append(f"  {at}  #{line.sequence:<5} {line.text}")
        lines += [f"{'':{len(at) + 14}}! {problem}" for problem in line.problems]
    lines.append("")
    lines += _table(replay, verdict.state)
    lines.append("")
    failed = len(verdict.findings)
    lines.append(f"Checks: {replay.checks} on this round, {failed} finding(s)")
    lines += [f"  ! {f}" for f in verdict.findings]
    if verdict.stopped:
        lines.append(f"  ! replay stopped: {verdict.stopped}")
    if verdict.ok:
        lines.append("REPLAY OK")
    elif verdict.findings:
        lines.append("REPLAY FAILED")
    else:  # nothing wrong found, but not checked to its end (a shoe still sealed): exit 3
        lines.append("REPLAY NOT VERIFIED")
    return "\n".join(lines)


def _clock(moment: datetime) -> str:
    """The date too: a round may span days (a disconnection, an operator's closing); and the
    microseconds, as the events and the query API have them: a move a few milliseconds past
    its deadline, or two events of one second, read apart."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%fZ")


def _shoe_line(number: int | None, check: ShoeCheck | None) -> str:
    if number is None:
        return "Shoe: none (no cards dealt)"
    if check is None or check.source == "sealed":
        return f"Shoe {number}: still sealed, not verified (set BLACKJACK_AUDIT_KEY)"
    how = {
        "revealed": "its order, revealed at retirement,",
        "key": "its order, opened with the key (not yet retired),",
        "revealed+key": "its revealed order and the sealed one",
        "key+revealed": "its revealed order and the sealed one",
    }.get(check.source, check.source)
    verdict = "matches" if check.verified else "DOES NOT MATCH"
    return f"Shoe {number}: {how} {verdict} the commitment {check.commitment[:16]}..."


def _table(replay: RoundReplay, state: TableState | None) -> list[str]:
    cur = replay.currency
    lines = []
    dealer = replay.dealer
    in_flight = replay.status in ("betting", "playing") and state is not None
    if in_flight and state is not None and state.round == replay.round:
        if not state.dealer_shown:
            lines.append("Dealer: no cards yet")
        else:  # the hole card is revealed on the dealer's turn
            hidden = "" if state.phase == "dealer" else " (+ hole card)"
            lines.append(f"Dealer: {cards_text(state.dealer_shown)}{hidden}")
        for index, box in enumerate(state.boxes):
            for number, hand in enumerate(box.hands):
                lines.append(
                    f"Box {index} hand {number} ({box.player_id}): {cards_text(hand.cards)}, "
                    f"stake {money(hand.stake, cur)} - in play"
                )
    elif dealer:
        lines.append(f"Dealer: {cards_text(dealer)}")
    for s in replay.settlements:
        mark = (
            "ok" if s.ok else f"MISMATCH: the rules give {s.derived[0]} {money(s.derived[1], cur)}"
        )
        lines.append(
            f"Box {s.box} hand {s.hand} ({s.player_id}): {cards_text(s.cards)}, stake "
            f"{money(s.stake, cur)}: {s.recorded[0]}, pays {money(s.recorded[1], cur)}"
            f"{_voided(s)}  [{mark}]"
        )
    for s in replay.insurance:
        mark = (
            "ok" if s.ok else f"MISMATCH: the rules give {s.derived[0]} {money(s.derived[1], cur)}"
        )
        lines.append(
            f"Box {s.box} insurance ({s.player_id}): stake {money(s.stake, cur)}: {s.recorded[0]}, "
            f"pays {money(s.recorded[1], cur)}{_voided(s)}  [{mark}]"
        )
    for result in replay.results:
        span = replay.balances.get(result.player_id)
        before = f"{money(span[0], cur)} -> " if span else ""
        lines.append(
            f"{result.player_id}: wagered {money(result.wagered, cur)}, paid "
            f"{money(result.paid, cur)}, net {'+' if result.net > 0 else ''}"
            f"{money(result.net, cur)}{_moved(replay, result.player_id)}; balance {before}"
            f"{money(result.balance_after, cur)}"
        )
    settled = {result.player_id for result in replay.results}
    for player_id, (start, end) in sorted(replay.balances.items()):
        if player_id not in settled:  # took their bet back, or the round has no result
            moved = _moved(replay, player_id).removeprefix(", ")
            lines.append(
                f"{player_id}: {moved}{'; ' if moved else ''}balance {money(start, cur)} -> "
                f"{money(end, cur)}"
            )
    return lines


def _voided(settlement: Settlement) -> str:
    """A settlement the round's void took back (page 000: nothing paid stands)."""
    if not settlement.voided:
        return ""
    return ", voided: payout taken back" if settlement.recorded[1] else ", voided: stake back"


def _moved(replay: RoundReplay, player_id: str) -> str:
    """Money paid in or taken out at the table during the round, which the balance includes."""
    moved, cur = replay.moved.get(player_id, 0), replay.currency
    if not moved:
        return ""
    return f", {'paid in' if moved > 0 else 'taken out'} {money(abs(moved), cur)} at the table"
