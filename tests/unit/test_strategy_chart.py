"""The computed basic strategy against the published chart, and ``decide``'s fallbacks.

Anchor: the Wizard of Odds basic strategy chart for 4 to 8 decks, dealer stands on soft 17,
double after split, late surrender (the chart below is typed in from it; the strategy under test
is computed from the rules, not typed in).
"""

from __future__ import annotations

import pickle

import pytest

from blackjack.domain.rules import PRESETS, preset
from blackjack.strategy import UPCARDS, Strategy, compute_strategy, render_chart
from blackjack.strategy.anchors import EIGHT_DECKS_H17_DAS_LS, EIGHT_DECKS_S17_DAS_LS

# Wizard of Odds, 4-8 decks, S17, DAS, late surrender. Columns: dealer 2 3 4 5 6 7 8 9 T A.
# D = double else hit, Ds = double else stand, Rh = surrender else hit, P = split.
PUBLISHED_HARD = {
    5: "H H H H H H H H H H",
    6: "H H H H H H H H H H",
    7: "H H H H H H H H H H",
    8: "H H H H H H H H H H",
    9: "H D D D D H H H H H",
    10: "D D D D D D D D H H",
    11: "D D D D D D D D D H",
    12: "H H S S S H H H H H",
    13: "S S S S S H H H H H",
    14: "S S S S S H H H H H",
    15: "S S S S S H H H Rh H",
    16: "S S S S S H H Rh Rh Rh",
    17: "S S S S S S S S S S",
    18: "S S S S S S S S S S",
    19: "S S S S S S S S S S",
    20: "S S S S S S S S S S",
}
PUBLISHED_SOFT = {
    13: "H H H D D H H H H H",
    14: "H H H D D H H H H H",
    15: "H H D D D H H H H H",
    16: "H H D D D H H H H H",
    17: "H D D D D H H H H H",
    18: "S Ds Ds Ds Ds S S H H H",
    19: "S S S S S S S S S S",
    20: "S S S S S S S S S S",
}
PUBLISHED_PAIRS = {
    "2": "P P P P P P H H H H",
    "3": "P P P P P P H H H H",
    "4": "H H H P P H H H H H",
    "5": "D D D D D D D D H H",
    "6": "P P P P P H H H H H",
    "7": "P P P P P P H H H H",
    "8": "P P P P P P P P P P",
    "9": "P P P P P S P P S S",
    "T": "S S S S S S S S S S",
    "A": "P P P P P P P P P P",
}

# The cells where hitting soft 17 changes the published chart (Wizard of Odds, 4-8 decks,
# H17, DAS, late surrender), as (row, upcard): (S17 code, H17 code).
H17_DIFFERENCES = {
    ("hard 11", "A"): ("H", "D"),
    ("hard 15", "A"): ("H", "Rh"),
    ("hard 17", "A"): ("S", "Rs"),
    ("soft 18", "2"): ("S", "Ds"),
    ("soft 19", "6"): ("S", "Ds"),
    ("pair 8", "A"): ("P", "Rp"),
}


def parse_chart(text: str) -> dict[str, list[str]]:
    """``render_chart`` output as {"hard 12": [codes by upcard], "soft 18": ..., "pair 8": ...}."""
    rows: dict[str, list[str]] = {}
    section = ""
    for line in text.splitlines():
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0] in ("Hard", "Soft", "Pairs") and tokens[1:] == list(UPCARDS):
            section = tokens[0]
            continue
        if section and len(tokens) >= 11 and len(tokens[-10:]) == 10:
            label = tokens[0]
            if section == "Hard" and label.isdigit():
                rows[f"hard {label}"] = tokens[-10:]
            elif section == "Soft":
                total = tokens[1] if label.startswith("A,") else label
                rows[f"soft {total}"] = tokens[-10:]
            elif section == "Pairs" and "," in label:
                rows[f"pair {label.split(',')[0]}"] = tokens[-10:]
    return rows


@pytest.fixture(scope="module")
def s17() -> Strategy:
    return compute_strategy(EIGHT_DECKS_S17_DAS_LS)


@pytest.fixture(scope="module")
def h17() -> Strategy:
    return compute_strategy(EIGHT_DECKS_H17_DAS_LS)


def published() -> dict[str, list[str]]:
    rows = {f"hard {t}": codes.split() for t, codes in PUBLISHED_HARD.items()}
    rows |= {f"soft {t}": codes.split() for t, codes in PUBLISHED_SOFT.items()}
    rows |= {f"pair {p}": codes.split() for p, codes in PUBLISHED_PAIRS.items()}
    return rows


def test_chart_matches_the_published_chart_cell_by_cell(s17: Strategy) -> None:
    ours = parse_chart(render_chart(s17))
    differences = [
        f"{row} vs {up}: computed {ours[row][i]}, published {codes[i]}"
        for row, codes in published().items()
        for i, up in enumerate(UPCARDS)
        if ours[row][i] != codes[i]
    ]
    assert differences == []
    assert ours["hard 21"] == ["S"] * 10


# Representative two-card hands for each row (no pairs in the hard and soft rows).
HARD_HANDS = {t: ["2C", f"{t - 2}D"] if t <= 11 else ["TC", f"{t - 10}D"] for t in range(5, 20)}
HARD_HANDS[5], HARD_HANDS[6] = ["2C", "3D"], ["2C", "4D"]
HARD_HANDS[9] = ["4C", "5D"]  # 2-7 would do as well; any two cards of the total share a row
SOFT_HANDS = {t: ["AS", f"{t - 11}H"] for t in range(13, 21)}
PAIR_HANDS = {p: [f"{p}S", f"{p}H"] for p in PUBLISHED_PAIRS}

EXPECTED = {  # code: (play with every option, play when double and surrender are not offered)
    "H": ("hit", "hit"),
    "S": ("stand", "stand"),
    "D": ("double", "hit"),
    "Ds": ("double", "stand"),
    "Rh": ("surrender", "hit"),
    "Rs": ("surrender", "stand"),
}


def test_decide_plays_the_published_chart(s17: Strategy) -> None:
    cases = [(HARD_HANDS[t], PUBLISHED_HARD[t]) for t in range(5, 20)]
    cases += [(SOFT_HANDS[t], PUBLISHED_SOFT[t]) for t in PUBLISHED_SOFT]
    for cards, codes in cases:
        for up, code in zip(UPCARDS, codes.split(), strict=True):
            best, fallback = EXPECTED[code]
            assert s17.decide(cards, up, True, False, True) == best, (cards, up)
            assert s17.decide(cards, up, False, False, False) == fallback, (cards, up)
    for pair, codes in PUBLISHED_PAIRS.items():
        for up, code in zip(UPCARDS, codes.split(), strict=True):
            expected = "split" if code == "P" else EXPECTED[code][0]
            assert s17.decide(PAIR_HANDS[pair], up, True, True, True) == expected, (pair, up)


@pytest.mark.parametrize("cell", list(H17_DIFFERENCES))
def test_hitting_soft_17_changes_the_published_cells(
    cell: tuple[str, str], s17: Strategy, h17: Strategy
) -> None:
    row, up = cell
    s17_code, h17_code = H17_DIFFERENCES[cell]
    i = UPCARDS.index(up)
    assert parse_chart(render_chart(s17))[row][i] == s17_code
    assert parse_chart(render_chart(h17))[row][i] == h17_code


def test_h17_chart_is_the_s17_chart_but_for_its_known_cells(s17: Strategy, h17: Strategy) -> None:
    ours_s17 = parse_chart(render_chart(s17))
    ours_h17 = parse_chart(render_chart(h17))
    changed = {
        (row, UPCARDS[i])
        for row in ours_s17
        for i in range(10)
        if ours_s17[row][i] != ours_h17[row][i]
    }
    assert changed == set(H17_DIFFERENCES)


# --- decide(): any legal state -----------------------------------------------------------------


def test_three_card_hands_play_the_rows_fallback(s17: Strategy) -> None:
    assert s17.decide(["AS", "2H", "5D"], "3C", False, False, False) == "stand"  # soft 18: Ds
    assert s17.decide(["2S", "4H", "5D"], "6C", False, False, False) == "hit"  # 11: D
    assert s17.decide(["TS", "4H", "2D"], "TC", False, False, False) == "hit"  # 16: Rh
    assert s17.decide(["5S", "4H", "3D", "AC"], "4C", False, False, False) == "stand"  # hard 13
    assert s17.decide(["AS", "AH", "5D"], "9C", False, False, False) == "hit"  # soft 17


def test_surrender_falls_back_to_hit_or_split(h17: Strategy) -> None:
    assert h17.decide(["TS", "6H"], "KD", True, False, True) == "surrender"
    assert h17.decide(["TS", "6H"], "KD", True, False, False) == "hit"
    assert h17.decide(["8S", "8H"], "AD", True, True, True) == "surrender"
    assert h17.decide(["8S", "8H"], "AD", True, True, False) == "split"
    assert h17.decide(["8S", "8H"], "AD", False, False, False) == "hit"
    assert h17.decide(["TS", "7H"], "AD", True, False, True) == "surrender"
    assert h17.decide(["TS", "7H"], "AD", True, False, False) == "stand"


def test_pairs_that_cannot_split_play_their_total(s17: Strategy) -> None:
    assert s17.decide(["AS", "AH"], "6D", True, False, False) == "double"  # soft 12 vs 6
    assert s17.decide(["AS", "AH"], "TD", False, False, False) == "hit"
    assert s17.decide(["5S", "5H"], "9D", True, True, True) == "double"
    assert s17.decide(["5S", "5H"], "9D", False, True, False) == "hit"
    assert s17.decide(["9S", "9H"], "7D", True, True, True) == "stand"
    assert s17.decide(["TS", "KH"], "6D", True, True, True) == "stand"


def test_split_by_rank_a_ten_and_a_king_are_a_hard_twenty() -> None:
    strategy = compute_strategy(preset("atlantic-city"))
    assert strategy.cell_for(["TS", "KH"], "6D") is strategy.hard[20]["6"]
    assert strategy.cell_for(["KS", "KH"], "6D") is strategy.pairs["T"]["6"]
    assert strategy.decide(["TS", "KH"], "6D", True, True, False) == "stand"


def test_cards_may_be_written_as_people_write_them(s17: Strategy) -> None:
    assert s17.decide(["10H", "A"], "K", True, False, True) == "stand"
    assert s17.decide(["8", "8"], "10S", True, True, True) == "split"
    with pytest.raises(ValueError, match="bust"):
        s17.decide(["TS", "8H", "5D"], "2C", False, False, False)
    with pytest.raises(ValueError, match="two cards"):
        s17.decide(["8S"], "2C", False, False, False)


def test_without_double_after_split_small_pairs_are_not_split() -> None:
    strategy = compute_strategy(
        EIGHT_DECKS_S17_DAS_LS.with_overrides({"double_after_split": False})
    )
    assert strategy.decide(["4S", "4H"], "5D", True, True, True) == "hit"
    assert strategy.decide(["6S", "6H"], "2D", True, True, True) == "hit"
    assert strategy.decide(["2S", "2H"], "2D", True, True, True) == "hit"
    assert strategy.decide(["2S", "2H"], "4D", True, True, True) == "split"


def test_doubling_on_nine_to_eleven_only_leaves_soft_hands_undoubled() -> None:
    chart = parse_chart(render_chart(compute_strategy(preset("mini-s17"))))
    assert all("D" not in code for row, codes in chart.items() if "soft" in row for code in codes)
    assert chart["soft 18"] == ["S", "S", "S", "S", "S", "S", "S", "H", "H", "H"]
    assert chart["hard 9"][1:5] == ["D"] * 4
    assert "D" in chart["pair 5"]
    assert all("R" not in code for codes in chart.values() for code in codes)  # no surrender


def test_a_soft_hand_counted_low_doubles_where_its_low_total_does() -> None:
    """``double_totals_ace_low`` under H17: A-8 (a 9 with the ace counted one) doubles against
    a 6, as A-8 does where any two cards double; without the option it stands."""
    h17 = preset("mini-s17").with_overrides({"dealer_hits_soft_17": True})
    low = h17.with_overrides({"double_totals_ace_low": True})
    low_chart = render_chart(compute_strategy(low))
    assert parse_chart(low_chart)["soft 19"][4] == "Ds"
    assert parse_chart(render_chart(compute_strategy(h17)))["soft 19"][4] == "S"
    assert "(a soft hand's ace counted one too)" in low_chart
    # A-7 is an 8 or an 18: no total of 9, 10 or 11, so it never doubles at this table.
    assert "D" not in "".join(parse_chart(low_chart)["soft 18"])


def test_every_preset_renders_a_chart_with_its_rules_and_legend() -> None:
    for name, rules in PRESETS.items():
        text = render_chart(compute_strategy(rules))
        assert f"Basic strategy: {name}" in text
        assert "Ds double, else stand" in text
        assert len(parse_chart(text)) == 17 + 9 + 10


def test_strategy_pickles_for_worker_processes(s17: Strategy) -> None:
    copy = pickle.loads(pickle.dumps(s17))
    assert copy == s17
    assert copy.decide(["TS", "6H"], "9D", True, False, True) == "surrender"
