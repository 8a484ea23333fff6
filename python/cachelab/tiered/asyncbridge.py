"""Async loaders behind the synchronous cache: :func:`sync_loader` turns a coroutine-function
loader into the synchronous one :class:`~cachelab.tiered.TieredCache` calls, run on the event
loop of the :class:`~cachelab.tiered.AsyncTieredCache` call its worker thread serves (see
:mod:`cachelab.tiered.aio`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import threading
from collections.abc import Callable, Mapping
from typing import Any

from cachelab.errors import UsageError

__all__ = ["serving", "sync_loader"]

#: Per worker thread: (the event loop of the call it serves, the loader timeout), or None.
serving = threading.local()


def sync_loader(loader: Callable[[list[Any]], Any]) -> Callable[[list[Any]], Mapping[Any, Any]]:
    """``loader`` if it is synchronous; for a coroutine function, a synchronous loader that
    runs it on the event loop of the :class:`AsyncTieredCache` call being served (from its
    worker thread), or with :func:`asyncio.run` where no loop runs in the calling thread."""
    if not inspect.iscoroutinefunction(loader):
        return loader

    @functools.wraps(loader)
    def load(idents: list[Any]) -> Mapping[Any, Any]:
        ctx = getattr(serving, "ctx", None)
        if ctx is not None:
            loop, timeout = ctx
            fut = asyncio.run_coroutine_threadsafe(loader(idents), loop)
            try:
                return fut.result(timeout)
            except concurrent.futures.TimeoutError:
                if fut.done():  # the loader's own TimeoutError
                    raise
                fut.cancel()
                raise TimeoutError(
                    f"async loader {getattr(loader, '__qualname__', loader)!r} took more than "
                    f"loader_timeout={timeout} s") from None
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # plain synchronous code: a loop of its own for this load
            return asyncio.run(loader(idents))
        raise UsageError(
            "an async loader cannot be run by the synchronous TieredCache API from the event "
            "loop's thread (it would block the loop): read through AsyncTieredCache")

    load.async_loader = loader  # type: ignore[attr-defined]
    return load
