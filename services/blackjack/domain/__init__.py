"""The functional core: pure blackjack rules with no I/O, clock or randomness."""
