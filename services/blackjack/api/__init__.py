"""The HTTP query API over the read model (``routes.query_api``)."""

from blackjack.api.routes import QueryApi, query_api

__all__ = ["QueryApi", "query_api"]
