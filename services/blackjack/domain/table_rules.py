"""The rules a new table opens with: a variant's preset with an ``OpenTable``'s overrides, and
what no new table takes. ``OpenTable`` refuses these ``invalid_rules``; the math commands
(``rtp``, ``strategy``, ``simulate``, ``--overrides``) refuse the same, so that no figure is
printed for a table that cannot be opened.

Checked here, not in ``Rules``: a table opened before a check came still reads (its
``TableOpened`` folds with the rules it was opened with)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from blackjack.domain.rejections import in_one_line
from blackjack.domain.rules import MAX_BET, Rules, currency_refusal


class RulesRefused(ValueError):
    """Overrides no new table takes, named in one line."""


def table_rules(variant: str, base: Rules, overrides: Mapping[str, Any]) -> Rules:
    """``base`` (the preset of ``variant``) with ``overrides``; ``RulesRefused`` for a rule set
    no new table takes."""
    if overrides.get("name", variant) != variant:  # history and audit show it
        raise RulesRefused("name: the variant's name is not a rule to override")
    try:
        rules = base.with_overrides(dict(overrides)) if overrides else base
    except ValidationError as error:
        raise RulesRefused(in_one_line(error, "rules")) from None
    if rules.max_bet > MAX_BET:
        raise RulesRefused(f"max_bet: at most {MAX_BET} minor units")
    if (refusal := currency_refusal(base, overrides, rules)) is not None:
        raise RulesRefused(refusal)
    if rules.seats > 1 and rules.turn_seconds is None:
        raise RulesRefused(
            "turn_seconds: a table of several seats needs its clock, or one player who does "
            "not act holds everyone up for good"
        )
    if rules.seats == 1 and rules.seat_released_after_rounds_sat_out is not None:
        raise RulesRefused(
            "seat_released_after_rounds_sat_out: only a table of several seats sits a player "
            "out; a single-player table is the player's own"
        )
    return rules
