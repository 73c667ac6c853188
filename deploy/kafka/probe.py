"""Readiness probe for kafka.sh: send one Metadata request (v4) to a broker.

Usage: python3 probe.py HOST PORT [TIMEOUT_S]
Exits 0 when the broker answers with at least one live broker, 1 otherwise.
Standard library only, so it runs before any virtualenv exists.
"""

from __future__ import annotations

import socket
import struct
import sys

API_METADATA = 3
VERSION = 4  # Non-flexible and supported by Kafka 2.x .. 4.x.


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return buf


def live_brokers(host: str, port: int, timeout: float) -> int:
    client_id = b"kafka.sh-probe"
    # Request header v1 + Metadata v4 body (topics=null -> all, allow_auto_topic_creation=false).
    body = struct.pack(">hhih", API_METADATA, VERSION, 1, len(client_id)) + client_id
    body += struct.pack(">ib", -1, 0)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        resp = _recv_exact(sock, size)
    # Response: correlation_id int32, throttle_time_ms int32, brokers array (int32 count).
    corr, _throttle, n_brokers = struct.unpack(">iii", resp[:12])
    if corr != 1:
        raise ValueError(f"unexpected correlation id {corr}")
    return int(n_brokers)


def main() -> int:
    host, port = sys.argv[1], int(sys.argv[2])
    timeout = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
    try:
        return 0 if live_brokers(host, port, timeout) > 0 else 1
    except (OSError, ValueError, struct.error):
        return 1


if __name__ == "__main__":
    sys.exit(main())
