"""The store the benchmark reads from: SQLite in a temporary directory, or PostgreSQL (a
schema of its own, dropped at the end). Each holds the record and the list, and reads them
back as dicts, one query per read."""

from __future__ import annotations

import secrets
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from cachelab.errors import UsageError

__all__ = ["PostgresStore", "SQLiteStore", "open_store"]


class SQLiteStore:
    name = "sqlite"

    def __init__(self, record: dict[str, Any], items: list[dict[str, Any]]) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="cachelab-tiers-")
        self.db = sqlite3.connect(Path(self._dir.name) / "store.sqlite")
        self.db.execute(
            "CREATE TABLE record (id INTEGER PRIMARY KEY, title TEXT, body TEXT, author TEXT, "
            "created INTEGER)")
        self.db.execute(
            "CREATE TABLE comment (id INTEGER PRIMARY KEY, post INTEGER, author TEXT, "
            "created INTEGER, text TEXT)")
        self.db.execute("CREATE INDEX comment_post ON comment (post)")
        self.db.execute("INSERT INTO record VALUES (:id, :title, :body, :author, :created)",
                        record)
        self.db.executemany(
            "INSERT INTO comment VALUES (:id, :post, :author, :created, :text)", items)
        self.db.commit()

    def read_record(self) -> dict[str, Any]:
        cur = self.db.execute("SELECT id, title, body, author, created FROM record WHERE id = 1")
        names = [d[0] for d in cur.description]
        return dict(zip(names, cur.fetchone()))

    def read_list(self) -> list[dict[str, Any]]:
        cur = self.db.execute(
            "SELECT id, post, author, created, text FROM comment WHERE post = 1 ORDER BY id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def close(self) -> None:
        self.db.close()
        self._dir.cleanup()


class PostgresStore(SQLiteStore):
    name = "postgresql"

    def __init__(self, dsn: str, record: dict[str, Any], items: list[dict[str, Any]]) -> None:
        try:
            # deferred: psycopg is optional; only a PostgreSQL store needs it
            import psycopg
        except ImportError:
            raise UsageError("--dsn needs psycopg: pip install 'psycopg[binary]'") from None
        # A connect waits at most 10 s unless the DSN says otherwise (every network wait has
        # a timeout); a server that cannot be reached is the user's to fix, not a traceback.
        extra = {} if "connect_timeout" in dsn else {"connect_timeout": 10}
        try:
            self.db = psycopg.connect(dsn, autocommit=True, **extra)
        except psycopg.Error as e:
            raise UsageError(f"--dsn: cannot connect to PostgreSQL: {e}".strip()) from None
        self.schema = f"cachelab_tiers_{secrets.token_hex(4)}"
        with self.db.cursor() as c:
            c.execute(f"CREATE SCHEMA {self.schema}")
            c.execute(f"CREATE TABLE {self.schema}.record (id INT PRIMARY KEY, title TEXT, "
                      "body TEXT, author TEXT, created BIGINT)")
            c.execute(f"CREATE TABLE {self.schema}.comment (id INT PRIMARY KEY, post INT, "
                      "author TEXT, created BIGINT, text TEXT)")
            c.execute(f"CREATE INDEX ON {self.schema}.comment (post)")
            c.execute(f"INSERT INTO {self.schema}.record VALUES (%(id)s, %(title)s, %(body)s, "
                      "%(author)s, %(created)s)", record)
            c.executemany(f"INSERT INTO {self.schema}.comment VALUES (%(id)s, %(post)s, "
                          "%(author)s, %(created)s, %(text)s)", items)

    def read_record(self) -> dict[str, Any]:
        with self.db.cursor() as c:
            c.execute(f"SELECT id, title, body, author, created FROM {self.schema}.record "
                      "WHERE id = 1")
            names = [d[0] for d in c.description]
            return dict(zip(names, c.fetchone()))

    def read_list(self) -> list[dict[str, Any]]:
        with self.db.cursor() as c:
            c.execute(f"SELECT id, post, author, created, text FROM {self.schema}.comment "
                      "WHERE post = 1 ORDER BY id")
            names = [d[0] for d in c.description]
            return [dict(zip(names, r)) for r in c.fetchall()]

    def close(self) -> None:
        with self.db.cursor() as c:
            c.execute(f"DROP SCHEMA {self.schema} CASCADE")
        self.db.close()


def open_store(dsn: str | None, record: dict[str, Any],
               items: list[dict[str, Any]]) -> SQLiteStore:
    """PostgreSQL at ``dsn``, else SQLite, holding the record and the list."""
    return PostgresStore(dsn, record, items) if dsn else SQLiteStore(record, items)
