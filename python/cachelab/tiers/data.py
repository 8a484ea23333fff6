"""The data the benchmark reads: the seed's ~60 KB text record and list of small records."""

from __future__ import annotations

import random
from typing import Any

from cachelab.tiers.spec import TiersSpec

__all__ = ["make_data"]

_WORDS = (  # noqa: SIM905 - a paragraph of words reads better than a list literal
    "the of and to in is was for on that with as by at from his her which an be this are "
    "cache memory instance request latency server value record list comment topic exercise "
    "video article student teacher progress datastore query serialization compression "
    "protocol buffer network round trip quota application instance engine storage"
).split()


def _text(rng: random.Random, n: int) -> str:
    out: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(_WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def make_data(spec: TiersSpec) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The 60 KB record and the list of small records (dicts of plain types)."""
    rng = random.Random(spec.seed)
    record = {"id": 1, "title": _text(rng, 60), "body": _text(rng, spec.record_bytes - 100),
              "author": "author-1", "created": 1_700_000_000}
    # ~item_bytes once encoded: four small fields around a text
    text_len = max(4, spec.item_bytes - 45)
    items = [
        {"id": i, "post": 1, "author": f"user-{rng.randrange(10_000)}",
         "created": 1_700_000_000 + i * 37, "text": _text(rng, text_len)}
        for i in range(spec.list_items)
    ]
    return record, items
