"""``cachelab.size.run``: the verb's one entry — the memory a hit ratio takes."""

from __future__ import annotations

from cachelab.progress import Progress
from cachelab.size.sizing import SizeResult, SizeSpec, size
from cachelab.target import Target

__all__ = ["run"]


def run(spec: SizeSpec, target: Target | None = None, *,
        progress: Progress | None = None) -> SizeResult:
    """Sizes the cache for ``spec``'s trace or capture (no server: ``target`` and
    ``progress`` are unused). Raises as :func:`cachelab.size.size` does."""
    return size(spec)
