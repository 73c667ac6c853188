"""``blackjack play``: a person at a terminal playing a table of the running service.

follow   the table's public events from ``blackjack.events``, folded as the read model
         folds them (``projections.projector.StreamProjection``)
moves    what the player types, as the table's commands
help     the moves in a player's words, in 78 columns (``?``, ``blackjack play --help``)
screen   the table as the player sees it (rich)
cli      the loop: a line typed, its command sent, the events it wrote awaited and shown
"""
