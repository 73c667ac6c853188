"""Read models folded from ``blackjack.events``: wallets (the players' accounts at each table)
and game history (every round with its cards, actions, wagers and payouts).

The consumed offset of each partition is stored in the same database transaction as the
read-model change it caused, so a crash or a redelivery never counts an event twice and never
skips one; the worker seeks to the stored offsets whenever it is given a partition.
"""
