"""The HTTP query API over the read model (``routes.query_api``)."""
