"""``cachelab tiers``: the seed's storage benchmark (App Engine datastore vs memcache vs instance
memory, with serialization and compression), as a measurement on this machine.

Two data shapes, as in the seed: one ~60 KB text record, and a list of 1,000 small records
(~100 B each, like comments). Each is read, again and again, from:

* ``store`` — the database: SQLite by default (a file in a temporary directory), PostgreSQL
  with ``dsn`` (needs ``psycopg``); one query, rows made into dicts;
* ``memcached raw`` — the encoded bytes fetched and not decoded (the transport alone);
* ``memcached + <codec>`` — fetched and decoded into ready objects;
* ``memcached + <codec> + zlib|zstd|lz4`` — fetched, decompressed, decoded;
* ``memory ready`` — the ready object from a dict in process;
* ``memory + <codec>`` (and ``+ zlib``) — encoded bytes from a dict in process, decoded.

Methods are interleaved read by read (one read of each per round, in a new shuffled order every
round), so drift on a shared machine falls on all of them alike and no method always follows
the same one. Each read's wall time and this thread's CPU time are recorded.
Values go through :class:`cachelab.tiered.ValueFormat`, the same encoding the tiered cache uses.

Rooms: ``spec`` (what is measured), ``data`` (the record and the list), ``stores`` (SQLite,
PostgreSQL), ``engine`` (the run, on the server ``Target.open`` gives), ``findings`` (the
seed's findings checked), ``result`` (the result, its artifacts and its table), ``plots``
(its bar chart), ``section`` (its part of the report).
"""

from cachelab.tiers.data import make_data
from cachelab.tiers.engine import tiers
from cachelab.tiers.findings import findings
from cachelab.tiers.result import CSV_COLUMNS, SCHEMA, SCHEMA_VERSION, TiersResult, render
from cachelab.tiers.spec import SHAPES, TiersSpec
from cachelab.tiers.verb import run

__all__ = [
    "CSV_COLUMNS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SHAPES",
    "TiersResult",
    "TiersSpec",
    "findings",
    "make_data",
    "render",
    "run",
    "tiers",
]
