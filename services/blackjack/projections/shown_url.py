"""A database URL as a log line or an error may print it."""

from __future__ import annotations

from sqlalchemy.engine import make_url


def shown_db_url(url: str) -> str:
    """``url`` with its password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: nothing of it shown
        return "the database"
