"""Decorators: cache a function by its arguments (``@cache.cached``), or a function of a list
of idents by each ident (``@cache.cached_many``).

::

    @cache.cached(ttl=300)
    def user_profile(user_id: int, *, lang: str = "en") -> dict: ...

    user_profile(42)                       # loads once, then L1 / memcached
    user_profile(user_id=42, lang="en")    # the same key: arguments are bound, defaults applied
    user_profile.invalidate(42)            # forget it (here and in memcached)
    user_profile.refresh(42)               # forget it and load it again now

    @cache.cached_many()
    def users(ids: list[int]) -> dict[int, dict]: ...   # {id: user} for the ids it knows

    users([1, 2, 3])                       # one multi-get; the function gets only the misses

Each decorated function is a key class (:meth:`TieredCache.key_class
<cachelab.tiered.TieredCache.key_class>`) named after the function (``name=`` to choose; the
name is part of every memcached key, so it must be the same in every process sharing them).
For ``cached`` the ident is made from the arguments, bound to the signature with defaults
applied: the value of the only parameter, or a tuple of all of them in signature order
(``**kwargs`` as sorted ``(name, value)`` pairs); ``key=`` replaces this by your function of
the same arguments. Arguments must be hashable. Methods: give ``key=`` to leave ``self`` out.

With :class:`~cachelab.tiered.AsyncTieredCache` the wrappers are coroutine functions and the
function may be ``async def`` (it runs on the caller's event loop).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import re
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from cachelab.errors import UsageError
from cachelab.tiered.keys import KeyClass

#: A TieredCache or an AsyncTieredCache (not imported: both import this module).
Target = Any

__all__ = ["AsyncCached", "AsyncCachedMany", "Cached", "CachedMany", "cached", "cached_many"]

R = TypeVar("R")
V = TypeVar("V")

_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]+")


def class_name(fn: Callable[..., Any]) -> str:
    """A key class name for ``fn``: its qualified name in the characters a name allows
    (``a.b`` -> ``a-b``), shortened with a stable hash beyond 40 characters."""
    qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or "fn"
    name = _UNSAFE.sub("-", qual.replace("<locals>", "")).strip("-")
    if len(name) > 40 or not name:
        digest = hashlib.blake2b(qual.encode(), digest_size=4).hexdigest()
        name = f"{name[:31]}-{digest}"
    return name


class _Calls:
    """The arguments of the calls in progress, by ident: the loader looks them up (a loader
    runs only for idents some caller is waiting for)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._args: dict[Hashable, list[Any]] = {}

    @contextmanager
    def hold(self, ident: Hashable, args: tuple, kwargs: dict) -> Iterator[None]:
        with self._lock:
            e = self._args.get(ident)
            if e is None:
                self._args[ident] = [1, args, kwargs]
            else:
                e[0] += 1
        try:
            yield
        finally:
            with self._lock:
                e = self._args[ident]
                e[0] -= 1
                if e[0] == 0:
                    del self._args[ident]

    def of(self, ident: Hashable) -> tuple[tuple, dict]:
        with self._lock:
            e = self._args.get(ident)
        if e is None:
            raise UsageError(f"no call in progress for ident {ident!r}: a cached function's "
                             "key class is loaded only through the function")
        return e[1], e[2]


def _ident_maker(fn: Callable[..., Any]) -> Callable[..., Hashable]:
    """``ident(*args, **kwargs)`` per the module docstring."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    single = (len(params) == 1 and params[0].kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                      inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                      inspect.Parameter.KEYWORD_ONLY))

    def ident(*args: Any, **kwargs: Any) -> Hashable:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{fn.__qualname__}(): {e}") from None
        bound.apply_defaults()
        values = bound.arguments
        if single:
            return values[params[0].name]
        out = []
        for p in params:
            v = values[p.name]
            if p.kind is inspect.Parameter.VAR_KEYWORD:
                v = tuple(sorted(v.items()))
            out.append(v)
        return tuple(out)

    return ident


class _Base(Generic[R]):
    def __init__(self, cache: Target, fn: Callable[..., Any], kc: KeyClass[R],
                 ident: Callable[..., Hashable]) -> None:
        functools.update_wrapper(self, fn)  # sets __wrapped__ too
        #: The cache (a TieredCache, or an AsyncTieredCache for the awaited kinds).
        self.cache = cache
        #: The key class this function's values are cached under.
        self.key_class = kc
        self._ident = ident
        self._calls = _Calls()

    def ident(self, *args: Any, **kwargs: Any) -> Hashable:
        """The ident (the key within :attr:`key_class`) of these arguments."""
        i = self._ident(*args, **kwargs)
        hash(i)  # TypeError now for an unhashable argument, not deep in the cache
        return i

    def __repr__(self) -> str:
        return f"<cached {self.__wrapped__.__qualname__} as {self.key_class!r}>"


class Cached(_Base[R]):
    """A function cached by its arguments (made by :meth:`TieredCache.cached
    <cachelab.tiered.TieredCache.cached>`)."""

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        i = self.ident(*args, **kwargs)
        with self._calls.hold(i, args, kwargs):
            return self.cache.get(self.key_class, i)  # type: ignore[return-value]

    def invalidate(self, *args: Any, **kwargs: Any) -> None:
        """Forgets the value for these arguments (this process's L1 and memcached)."""
        self.cache.invalidate(self.key_class, self.ident(*args, **kwargs))

    def refresh(self, *args: Any, **kwargs: Any) -> R:
        """Forgets the value for these arguments and computes it again now; returns it."""
        self.invalidate(*args, **kwargs)
        return self(*args, **kwargs)


class AsyncCached(_Base[R]):
    """A function cached by its arguments, awaited (made by :meth:`AsyncTieredCache.cached
    <cachelab.tiered.AsyncTieredCache.cached>`)."""

    async def __call__(self, *args: Any, **kwargs: Any) -> R:
        i = self.ident(*args, **kwargs)
        with self._calls.hold(i, args, kwargs):
            return await self.cache.get(self.key_class, i)  # type: ignore[return-value]

    async def invalidate(self, *args: Any, **kwargs: Any) -> None:
        """Forgets the value for these arguments (this process's L1 and memcached)."""
        await self.cache.invalidate(self.key_class, self.ident(*args, **kwargs))

    async def refresh(self, *args: Any, **kwargs: Any) -> R:
        """Forgets the value for these arguments and computes it again now; returns it."""
        await self.invalidate(*args, **kwargs)
        return await self(*args, **kwargs)


class CachedMany(Generic[V]):
    """A function of a list of idents returning ``{ident: value}``, read through
    :meth:`TieredCache.get_many <cachelab.tiered.TieredCache.get_many>` (made by
    :meth:`TieredCache.cached_many <cachelab.tiered.TieredCache.cached_many>`)."""

    def __init__(self, cache: Any, fn: Callable[..., Any], kc: KeyClass[V]) -> None:
        functools.update_wrapper(self, fn)  # sets __wrapped__ too
        self.cache = cache
        #: The key class this function's values are cached under (its loader is the function).
        self.key_class = kc

    def __call__(self, idents: Iterable[Any]) -> dict[Any, V]:
        return self.cache.get_many(self.key_class, idents)  # type: ignore[no-any-return]

    def invalidate(self, *idents: Any) -> None:
        """Forgets ``idents``' values (this process's L1 and memcached)."""
        for i in idents:
            self.cache.invalidate(self.key_class, i)

    def refresh(self, idents: Iterable[Any]) -> dict[Any, V]:
        """Forgets ``idents``' values and loads them again now (one call of the function)."""
        idents = list(idents)
        self.invalidate(*idents)
        return self(idents)

    def __repr__(self) -> str:
        return f"<cached_many {self.__wrapped__.__qualname__} as {self.key_class!r}>"


class AsyncCachedMany(CachedMany[V]):
    """:class:`CachedMany`, awaited (made by :meth:`AsyncTieredCache.cached_many
    <cachelab.tiered.AsyncTieredCache.cached_many>`)."""

    async def __call__(self, idents: Iterable[Any]) -> dict[Any, V]:  # type: ignore[override]
        return await self.cache.get_many(self.key_class, idents)  # type: ignore[no-any-return]

    async def invalidate(self, *idents: Any) -> None:  # type: ignore[override]
        for i in idents:
            await self.cache.invalidate(self.key_class, i)

    async def refresh(self, idents: Iterable[Any]) -> dict[Any, V]:  # type: ignore[override]
        idents = list(idents)
        await self.invalidate(*idents)
        return await self(idents)


def _is_async(target: Target) -> bool:
    """Whether ``target`` is an AsyncTieredCache (its ``get`` is awaited)."""
    return inspect.iscoroutinefunction(target.get)


def cached(target: Target, name: str | None = None, *,
           ttl: int = 3600, key: Callable[..., Hashable] | None = None,
           codec: str = "msgpack", compression: str = "none", threshold: int = 1024,
           l1: bool = True, namespace: str | None = None) -> Callable[[Callable[..., Any]], Any]:
    """The decorator behind ``target.cached(...)`` (see the module docstring): a key class
    named ``name`` (default: from the function) with these options, whose loader calls the
    function for each ident."""
    is_async = _is_async(target)

    def decorate(fn: Callable[..., Any]) -> Any:
        if inspect.iscoroutinefunction(fn) and not is_async:
            raise UsageError(f"{fn.__qualname__} is async: decorate it with "
                             "AsyncTieredCache(cache).cached(...)")
        ident = key if key is not None else _ident_maker(fn)
        holder: list[_Base[Any]] = []

        if inspect.iscoroutinefunction(fn):
            async def load(idents: list[Any]) -> dict[Any, Any]:
                calls = holder[0]._calls
                out = {}
                for i in idents:  # one ident per call in practice (a get of one key)
                    args, kwargs = calls.of(i)
                    out[i] = await fn(*args, **kwargs)
                return out
            loader: Callable[[list[Any]], Any] = load
        else:
            def load_sync(idents: list[Any]) -> dict[Any, Any]:
                calls = holder[0]._calls
                out = {}
                for i in idents:
                    args, kwargs = calls.of(i)
                    out[i] = fn(*args, **kwargs)
                return out
            loader = load_sync

        kc = target.key_class(name or class_name(fn), loader, codec=codec,
                              compression=compression, threshold=threshold, ttl=ttl, l1=l1,
                              namespace=namespace)
        wrapper: _Base[Any] = (AsyncCached(target, fn, kc, ident) if is_async  # type: ignore[arg-type]
                               else Cached(target, fn, kc, ident))  # type: ignore[arg-type]
        holder.append(wrapper)
        return wrapper

    return decorate


def cached_many(target: Target, name: str | None = None, *,
                ttl: int = 3600, codec: str = "msgpack", compression: str = "none",
                threshold: int = 1024, l1: bool = True,
                namespace: str | None = None) -> Callable[[Callable[..., Any]], Any]:
    """The decorator behind ``target.cached_many(...)``: the function, ``fn(idents) ->
    {ident: value}``, is the key class's loader; calls go through ``get_many``."""
    is_async = _is_async(target)

    def decorate(fn: Callable[[list[Any]], Mapping[Any, Any]]) -> Any:
        if inspect.iscoroutinefunction(fn) and not is_async:
            raise UsageError(f"{fn.__qualname__} is async: decorate it with "
                             "AsyncTieredCache(cache).cached_many(...)")
        kc = target.key_class(name or class_name(fn), fn, codec=codec, compression=compression,
                              threshold=threshold, ttl=ttl, l1=l1, namespace=namespace)
        return (AsyncCachedMany if is_async else CachedMany)(target, fn, kc)

    return decorate
