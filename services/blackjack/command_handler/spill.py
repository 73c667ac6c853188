"""The cold streams of a partition on local disk instead of in memory.

A cold stream is its sealed snapshot (compressed, encrypted), about 47 KiB with a full
idempotency window, and a handler keeps one for every stream its partitions ever had: held
in memory, they grew a handler by about 0.5 GB a month for 10,000 tables opened a month
(docs/operations.md, "What grows"). Here they are kept in a private, temporary SQLite
database: SQLite keeps at most its page cache (about 2 MiB) in memory and writes the rest to
a file it removes from the directory as soon as it opens it (so nothing is left behind, even
by a process killed with -9) in its temporary directory (``SQLITE_TMPDIR``, else ``/var/tmp``
or ``/tmp``). The file is scratch: nothing is made durable (a takeover rebuilds the
partition from the snapshots topic), so there is no journal and no sync.
"""

from __future__ import annotations

import sqlite3
import weakref
from collections.abc import Iterator, MutableMapping


class SpilledStreams(MutableMapping[str, bytes]):
    """Sealed snapshots by stream id, on disk; the ids alone stay in memory."""

    def __init__(self) -> None:
        # "": a private temporary database on disk (":memory:" would stay in memory)
        self._db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode = OFF")
        self._db.execute("PRAGMA synchronous = OFF")
        self._db.execute("PRAGMA cache_size = -2048")  # KiB: SQLite's default, made explicit
        self._db.execute("CREATE TABLE cold (stream_id TEXT PRIMARY KEY, sealed BLOB NOT NULL)")
        self._ids: set[str] = set()
        self._closed = weakref.finalize(self, self._db.close)

    def __getitem__(self, stream_id: str) -> bytes:
        if stream_id not in self._ids:
            raise KeyError(stream_id)
        row = self._db.execute("SELECT sealed FROM cold WHERE stream_id = ?", (stream_id,))
        sealed: bytes = row.fetchone()[0]
        return sealed

    def __setitem__(self, stream_id: str, sealed: bytes) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO cold (stream_id, sealed) VALUES (?, ?)", (stream_id, sealed)
        )
        self._ids.add(stream_id)

    def __delitem__(self, stream_id: str) -> None:
        if stream_id not in self._ids:
            raise KeyError(stream_id)
        self._db.execute("DELETE FROM cold WHERE stream_id = ?", (stream_id,))
        self._ids.discard(stream_id)

    def __contains__(self, stream_id: object) -> bool:
        return stream_id in self._ids

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._ids))

    def __len__(self) -> int:
        return len(self._ids)

    def clear(self) -> None:
        """All at once (``MutableMapping``'s pops one item at a time, each a query)."""
        self._db.execute("DELETE FROM cold")
        self._ids.clear()

    def close(self) -> None:
        """Remove the file now rather than when this is collected."""
        self._closed()

    @property
    def open(self) -> bool:
        """Not closed yet (``close``, or collected)."""
        return self._closed.alive
