"""Basic strategy and exact return-to-player, computed from a variant's ``Rules``.

* ``compute_strategy(rules) -> Strategy`` -- the chart, with ``Strategy.decide(...)``.
* ``render_chart(strategy) -> str`` -- the familiar hard/soft/pairs chart with a legend.
* ``compute_rtp(rules, bet=None) -> RtpReport`` -- house edge and RTP under that strategy.

Pure computation: no I/O, results cached in-process per rule set (``clear_caches()`` frees
them). Module layout: ``dealer`` (the dealer's outcome probabilities), ``solver`` (expected
values, the chart's derivation, splits), ``basic`` (``Strategy``/``Cell``/``decide``), ``chart``
(rendering), ``rtp`` (house edge and RTP per bet).
"""

from blackjack.strategy.basic import UPCARDS, Cell, Strategy, compute_strategy
from blackjack.strategy.chart import render_chart
from blackjack.strategy.rtp import RtpReport, compute_rtp
from blackjack.strategy.solver import Action, clear_caches

__all__ = [
    "UPCARDS",
    "Action",
    "Cell",
    "RtpReport",
    "Strategy",
    "clear_caches",
    "compute_rtp",
    "compute_strategy",
    "render_chart",
]
