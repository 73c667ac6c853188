"""The command handler: consume a command, decide, and produce its events, its result and the
consumed offset in one Kafka transaction, per partition, with replay on partition assignment."""
