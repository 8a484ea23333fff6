"""The request-trace format's fixed points: its schema name and version, the header object
every file starts with, and the limits of its columns (docs/traces.md).

The bottom of :mod:`cachelab.traces`: it imports nothing of the package, and every reader,
writer and the in-memory :class:`~cachelab.traces.request.RequestTrace` take these from here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cachelab.errors import InputError

__all__ = [
    "first_duplicate",
    "MAX_INSTANCE",
    "MAX_ITEMS",
    "MAX_REQUEST_ID",
    "MAX_SIZE",
    "SCHEMA",
    "SCHEMA_VERSION",
    "check_header",
    "header",
]

SCHEMA = "cachelab.request-trace"
SCHEMA_VERSION = 1

#: Largest catalog the columns can hold (uint32 item indices).
MAX_ITEMS = 2**32 - 1
#: Largest item size in bytes.
MAX_SIZE = 2**63 - 1
#: Largest request id (int64).
MAX_REQUEST_ID = 2**63 - 1
#: Instances are int32 in Parquet; JSONL has the same limit so the formats convert both ways.
MAX_INSTANCE = 2**31 - 1

_HEADER_FIELDS = frozenset(("schema", "version", "generator"))


def header(generator: dict[str, Any] | None) -> dict[str, Any]:
    """The header object of a request trace."""
    return {"schema": SCHEMA, "version": SCHEMA_VERSION, "generator": generator}


def check_header(obj: Any, where: str) -> dict[str, Any] | None:
    """Validates a header object; returns its ``generator``."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: the header must be a JSON object")
    if obj.get("schema") != SCHEMA:
        raise InputError(
            f"{where}: not a cachelab request trace (schema is {obj.get('schema')!r}, "
            f"expected {SCHEMA!r})"
        )
    version = obj.get("version")
    if version != SCHEMA_VERSION or type(version) is not int:
        raise InputError(
            f"{where}: request trace version {version!r} is not supported "
            f"(this cachelab reads version {SCHEMA_VERSION})"
        )
    unknown = sorted(set(obj) - _HEADER_FIELDS)
    if unknown:
        raise InputError(f"{where}: unknown header field(s) {', '.join(map(repr, unknown))}")
    generator = obj.get("generator")
    if generator is not None and not isinstance(generator, dict):
        raise InputError(f"{where}: 'generator' must be an object or null")
    return generator


def first_duplicate(ids: np.ndarray) -> tuple[int, int] | None:
    """The first position whose request id was already used, and the position that used it
    first; None when every id is distinct."""
    if len(ids) < 2:
        return None
    order = np.argsort(ids, kind="stable")
    same = ids[order[1:]] == ids[order[:-1]]
    if not same.any():
        return None
    second = int(order[1:][same].min())
    return second, int(order[np.searchsorted(ids[order], ids[second])])
