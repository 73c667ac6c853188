"""The table's decisions, one module per part of the game; ``domain.decide`` dispatches a
command to its decision."""
