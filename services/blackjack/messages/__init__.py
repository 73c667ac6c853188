"""The message contract: envelopes, the wire form of events (shoe secrets sealed), schemas."""
