"""A database URL as a log line or an error may print it."""

from __future__ import annotations


def shown_db_url(url: str) -> str:
    """``url`` with its password hidden."""
    from sqlalchemy.engine import make_url  # when needed: the command line starts without it

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: nothing of it shown
        return "the database"
