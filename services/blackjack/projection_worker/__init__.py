"""The projection worker's process: it folds ``blackjack.events`` into the read model
(``blackjack.projections``) and serves the query API over it (``blackjack.api``), with its
settings and the ``blackjack projections ...`` command line.

It sits above both: the read model knows nothing of the API, and the API reads the read
model, so neither imports this package.
"""
