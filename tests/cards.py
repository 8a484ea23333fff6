"""Reading an answer card (:mod:`cachelab.answers`) back from what a user sees."""

from __future__ import annotations

import re

__all__ = ["card_of"]


def card_of(stdout: str) -> dict[str, tuple[str, str]]:
    """The first card in ``stdout``, by question: (value, trust mark with its reason)."""
    lines = stdout.splitlines()
    start = lines.index("answer:")
    out = {}
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        question, rest = re.split(r"\s{2,}", line.strip(), maxsplit=1)
        value, mark = rest.rsplit("  — ", 1)
        out[question] = (value, mark)
    return out
