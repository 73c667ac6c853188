"""The AsyncAPI contract of the service's topics (``contract``: the document ``make schemas``
commits and the handler serves) and the page that renders it (``page``). Apart from ``bus``,
the Kafka adapters, because it documents every topic's messages, the handler's snapshots
and checkpoints included: in ``bus`` it made ``bus`` and ``command_handler`` import each other."""
