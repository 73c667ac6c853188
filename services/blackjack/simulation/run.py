"""Run a simulation on every core: chunks of rounds with their own seeds, a progress bar, and
the RTP with its 95 % confidence interval."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

from blackjack.domain.rules import Rules
from blackjack.simulation.player import Strategy, Tally, play

CHUNK_ROUNDS = 20_000
Z_95 = 1.959963984540054

StrategyFor = Callable[[Rules], Strategy]


@dataclass(frozen=True)
class SimulationReport:
    rules: Rules
    bet: int
    tally: Tally

    @property
    def rtp(self) -> float:
        """Return to player per unit of initial bet (the house-edge convention)."""
        return 1 + self.tally.net / self.tally.initial_bets

    @property
    def half_width(self) -> float:
        """Half the 95 % confidence interval of the RTP."""
        n = self.tally.rounds
        mean = self.tally.net / n
        variance = (self.tally.net_squares / n - mean * mean) * n / max(n - 1, 1)
        return Z_95 * math.sqrt(variance / n) / self.bet

    def outcome_shares(self) -> dict[str, float]:
        hands = self.tally.hands
        return {k: v / hands for k, v in sorted(self.tally.outcomes.items())}


def _chunk(rules: Rules, strategy_for: StrategyFor, rounds: int, bet: int, seed: int) -> Tally:
    return play(rules, strategy_for(rules), rounds, bet, seed)


def simulate(
    rules: Rules,
    strategy_for: StrategyFor,
    rounds: int,
    *,
    bet: int | None = None,
    seed: int = 1,
    workers: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> SimulationReport:
    stake = bet if bet is not None else rules.min_bet
    sizes = [CHUNK_ROUNDS] * (rounds // CHUNK_ROUNDS)
    if rounds % CHUNK_ROUNDS:
        sizes.append(rounds % CHUNK_ROUNDS)
    total = Tally()
    processes = workers or os.cpu_count() or 1
    if processes == 1:
        for index, size in enumerate(sizes):
            total.add(_chunk(rules, strategy_for, size, stake, seed * 1_000_003 + index))
            if on_progress:
                on_progress(size)
        return SimulationReport(rules=rules, bet=stake, tally=total)
    with ProcessPoolExecutor(max_workers=processes) as pool:
        futures = {
            pool.submit(_chunk, rules, strategy_for, size, stake, seed * 1_000_003 + index): size
            for index, size in enumerate(sizes)
        }
        for future in as_completed(futures):
            total.add(future.result())
            if on_progress:
                on_progress(futures[future])
    return SimulationReport(rules=rules, bet=stake, tally=total)
