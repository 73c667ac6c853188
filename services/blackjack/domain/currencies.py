"""Currencies' minor units: how many decimals an amount of each has (ISO 4217), so that the
rules' amounts, which are minor units, mean what they say in the table's currency, and how
such an amount is written (``money``)."""

from __future__ import annotations

from typing import Final

MINOR_UNITS: Final[dict[str, int]] = {
    **dict.fromkeys(("BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG"), 0),
    **dict.fromkeys(("RWF", "UGX", "UYI", "VND", "VUV", "XAF", "XOF", "XPF"), 0),
    **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3),
    **dict.fromkeys(("CLF", "UYW"), 4),
}
"""ISO 4217 currencies whose minor unit is not a hundredth (the rest have two decimals)."""


def decimals(currency: str | None) -> int:
    """How many decimals an amount in ``currency`` has: 0 for JPY, 3 for KWD, 2 for USD and
    any other code."""
    return MINOR_UNITS.get(currency or "", 2)


def whole_unit(currency: str) -> int:
    """One whole unit of ``currency`` in its minor units: 100 for USD, 1 for JPY."""
    return int(10 ** decimals(currency))  # int: the exponent is never negative


def money(amount: int, currency: str | None = None) -> str:
    """Minor units as the currency writes them: 1050 is 10.50 USD, 1050 JPY, 1.050 KWD."""
    sign = "-" if amount < 0 else ""
    places = decimals(currency)
    whole, part = divmod(abs(amount), 10**places)
    return f"{sign}{whole}.{part:0{places}d}" if places else f"{sign}{whole}"
