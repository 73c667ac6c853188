"""Event-sourced online blackjack game server."""
