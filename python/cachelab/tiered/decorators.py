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
the same arguments. Arguments must be hashable.

Methods, classmethods and staticmethods are decorated like functions (the decorator goes
under ``@classmethod`` / ``@staticmethod`` or over it, either works)::

    class Users:
        @cache.cached(ttl=300)
        def profile(self, user_id: int) -> dict: ...      # key: user_id alone

        @classmethod
        @cache.cached()
        def settings(cls, name: str) -> dict: ...         # key: name alone

        @cache.cached_many()
        def many(self, ids: list[int]) -> dict[int, dict]: ...

    users = Users()
    users.profile(42)                      # the same key as a plain function's profile(42)
    users.profile.invalidate(42)           # the helpers work bound too
    Users.profile(users, 42)               # through the class: the instance first, as usual

The instance (or class) is left out of the key: a method's first parameter is, when the
function is defined in a class body and that parameter is named ``self`` or ``cls`` (or it is
wrapped in ``classmethod``). So every instance shares one cached value per argument — the value
must not depend on the instance — and the loader gets the instance of one of the calls waiting
for it. To key by the instance too, give ``key=``: it gets the same arguments as the function,
the instance or class first (``key=lambda self, user_id: (self.tenant, user_id)``).

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
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

from cachelab.errors import UsageError
from cachelab.tiered.keys import KeyClass

#: A TieredCache or an AsyncTieredCache (not imported: both import this module).
Target = Any

__all__ = ["AsyncCached", "AsyncCachedMany", "Bound", "Cached", "CachedMany", "cached",
           "cached_many"]

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


# How a decorated function binds when read from a class or an instance (its kind, used by
# ``__get__``): "function" (as a plain function does: the instance becomes the first argument,
# and part of the key), "method" (the same, left out of the key), "class" (the class, left out
# of the key, also when read from an instance), "static" (no binding).


def _unwrap(fn: Any) -> tuple[Callable[..., Any], str]:
    """The function under ``fn`` and its kind (see above)."""
    if isinstance(fn, classmethod):
        return fn.__func__, "class"
    if isinstance(fn, staticmethod):
        return fn.__func__, "static"
    if not callable(fn):
        raise TypeError(f"cached: cannot decorate {type(fn).__qualname__} {fn!r}: a function, "
                        "method, classmethod or staticmethod is expected")
    qual = getattr(fn, "__qualname__", "") or ""
    owner, _, _ = qual.rpartition(".")
    in_class = bool(owner) and not owner.endswith("<locals>")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return fn, "function"
    first = params[0] if params else None
    if (in_class and first is not None and first.name in ("self", "cls")
            and first.kind in (inspect.Parameter.POSITIONAL_ONLY,
                               inspect.Parameter.POSITIONAL_OR_KEYWORD)):
        return fn, "method"
    return fn, "function"


def _ident_maker(fn: Callable[..., Any], skip_first: bool = False) -> Callable[..., Hashable]:
    """``ident(*args, **kwargs)`` per the module docstring; ``skip_first``: the first parameter
    (a method's instance or class) is bound but left out."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if skip_first:
        params = params[1:]
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


class Bound:
    """A cached function read from an instance or a class (``obj.method``): calls, and the
    helpers that take the function's arguments (``invalidate``, ``refresh``, ``ident``), get
    the instance or class first, as a bound method does; anything else is the function's."""

    __slots__ = ("__func__", "__self__")

    def __init__(self, func: Any, head: Any) -> None:
        self.__func__ = func
        self.__self__ = head

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__func__(self.__self__, *args, **kwargs)

    def invalidate(self, *args: Any, **kwargs: Any) -> Any:
        """The function's ``invalidate`` (awaitable with an AsyncTieredCache)."""
        return self.__func__._bound_invalidate(self.__self__, *args, **kwargs)

    def refresh(self, *args: Any, **kwargs: Any) -> Any:
        """The function's ``refresh`` (awaitable with an AsyncTieredCache)."""
        return self.__func__.refresh(self.__self__, *args, **kwargs)

    def ident(self, *args: Any, **kwargs: Any) -> Hashable:
        """The ident of these arguments (the instance or class left out, unless ``key=``
        keeps it)."""
        return self.__func__.ident(self.__self__, *args, **kwargs)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__func__, name)

    def __repr__(self) -> str:
        return f"<bound {self.__func__!r} of {self.__self__!r}>"


class _Binding:
    """``__get__`` by the wrapper's kind (see :func:`_unwrap`), shared by every wrapper."""

    _kind = "function"

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        kind = self._kind
        if kind == "static":
            return self
        if kind == "class":
            return Bound(self, objtype if objtype is not None else type(obj))
        if obj is None:  # read from the class: called with the instance first
            return self
        return Bound(self, obj)


class _Base(_Binding, Generic[R]):
    def __init__(self, cache: Target, fn: Callable[..., Any], kc: KeyClass[R],
                 ident: Callable[..., Hashable], kind: str = "function") -> None:
        functools.update_wrapper(self, fn)  # sets __wrapped__ too
        #: The cache (a TieredCache, or an AsyncTieredCache for the awaited kinds).
        self.cache = cache
        #: The key class this function's values are cached under.
        self.key_class = kc
        self._ident = ident
        self._calls = _Calls()
        self._kind = kind

    def _bound_invalidate(self, *args: Any, **kwargs: Any) -> Any:
        return self.invalidate(*args, **kwargs)  # type: ignore[attr-defined]

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


#: The instance or class a cached_many method is being called on (read by its loader).
_HEAD: ContextVar[tuple[Any, ...]] = ContextVar("cachelab_tiered_cached_many_head", default=())


class CachedMany(_Binding, Generic[V]):
    """A function of a list of idents returning ``{ident: value}``, read through
    :meth:`TieredCache.get_many <cachelab.tiered.TieredCache.get_many>` (made by
    :meth:`TieredCache.cached_many <cachelab.tiered.TieredCache.cached_many>`). As a method,
    ``fn(self, idents)``: the instance is not part of any key."""

    def __init__(self, cache: Any, fn: Callable[..., Any], kc: KeyClass[V],
                 kind: str = "function") -> None:
        functools.update_wrapper(self, fn)  # sets __wrapped__ too
        self.cache = cache
        #: The key class this function's values are cached under (its loader is the function).
        self.key_class = kc
        self._kind = kind
        self._headed = kind in ("method", "class")

    def _split(self, args: tuple[Any, ...]) -> tuple[tuple[Any, ...], Iterable[Any]]:
        """``(head, idents)`` of a call: ``head`` is ``(instance,)`` for a method, else ()."""
        if self._headed:
            if len(args) == 2:
                return args[:1], args[1]
            what = "the instance or class and the idents"
        elif len(args) == 1:
            return (), args[0]
        else:
            what = "one argument, the idents"
        raise TypeError(f"{self.__wrapped__.__qualname__}() takes {what} "
                        f"({len(args)} given)")

    def __call__(self, *args: Any) -> dict[Any, V]:
        head, idents = self._split(args)
        if not head:
            return self.cache.get_many(self.key_class, idents)  # type: ignore[no-any-return]
        token = _HEAD.set(head)
        try:
            return self.cache.get_many(self.key_class, idents)  # type: ignore[no-any-return]
        finally:
            _HEAD.reset(token)

    def invalidate(self, *idents: Any) -> None:
        """Forgets ``idents``' values (this process's L1 and memcached)."""
        for i in idents:
            self.cache.invalidate(self.key_class, i)

    def _bound_invalidate(self, head: Any, *idents: Any) -> Any:
        return self.invalidate(*idents)  # keys do not hold the instance

    def refresh(self, *args: Any) -> dict[Any, V]:
        """Forgets ``idents``' values and loads them again now (one call of the function);
        a method's takes the instance first, as its call does."""
        head, idents = self._split(args)
        idents = list(idents)
        self.invalidate(*idents)
        return self(*head, idents)

    def __repr__(self) -> str:
        return f"<cached_many {self.__wrapped__.__qualname__} as {self.key_class!r}>"


class AsyncCachedMany(CachedMany[V]):
    """:class:`CachedMany`, awaited (made by :meth:`AsyncTieredCache.cached_many
    <cachelab.tiered.AsyncTieredCache.cached_many>`)."""

    async def __call__(self, *args: Any) -> dict[Any, V]:  # type: ignore[override]
        head, idents = self._split(args)
        if not head:
            return await self.cache.get_many(self.key_class, idents)  # type: ignore[no-any-return]
        token = _HEAD.set(head)  # this task's context, copied to the worker that loads
        try:
            return await self.cache.get_many(self.key_class, idents)  # type: ignore[no-any-return]
        finally:
            _HEAD.reset(token)

    async def invalidate(self, *idents: Any) -> None:  # type: ignore[override]
        for i in idents:
            await self.cache.invalidate(self.key_class, i)

    async def refresh(self, *args: Any) -> dict[Any, V]:  # type: ignore[override]
        head, idents = self._split(args)
        idents = list(idents)
        await self.invalidate(*idents)
        return await self(*head, idents)


def _headed_loader(fn: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    """The loader of a cached_many method: ``fn`` called with the instance or class of the
    call being served (set by :class:`CachedMany` in the caller's context)."""

    def head() -> tuple[Any, ...]:
        h = _HEAD.get()
        if not h:
            raise UsageError(f"{fn.__qualname__} is a cached method: its key class is loaded "
                             "only through the method (obj.method(idents))")
        return h

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def load(idents: list[Any]) -> Any:
            return await fn(*head(), idents)
        return load

    @functools.wraps(fn)
    def load_sync(idents: list[Any]) -> Any:
        return fn(*head(), idents)
    return load_sync


def _is_async(target: Target) -> bool:
    """Whether ``target`` is an AsyncTieredCache (its ``get`` is awaited)."""
    return inspect.iscoroutinefunction(target.get)


def cached(target: Target, name: str | None = None, *,
           ttl: int = 3600, key: Callable[..., Hashable] | None = None,
           codec: str = "msgpack", compression: str = "none", threshold: int = 1024,
           l1: bool = True, namespace: str | None = None,
           soft_ttl: int | None = None) -> Callable[[Callable[..., Any]], Any]:
    """The decorator behind ``target.cached(...)`` (see the module docstring): a key class
    named ``name`` (default: from the function) with these options, whose loader calls the
    function for each ident."""
    is_async = _is_async(target)

    def decorate(fn: Callable[..., Any]) -> Any:
        fn, kind = _unwrap(fn)
        if inspect.iscoroutinefunction(fn) and not is_async:
            raise UsageError(f"{fn.__qualname__} is async: decorate it with "
                             "AsyncTieredCache(cache).cached(...)")
        ident = key if key is not None else _ident_maker(fn, kind in ("method", "class"))
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
                              namespace=namespace, soft_ttl=soft_ttl)
        wrapper: _Base[Any] = (AsyncCached if is_async else Cached)(  # type: ignore[arg-type]
            target, fn, kc, ident, kind)
        holder.append(wrapper)
        return wrapper

    return decorate


def cached_many(target: Target, name: str | None = None, *,
                ttl: int = 3600, codec: str = "msgpack", compression: str = "none",
                threshold: int = 1024, l1: bool = True, namespace: str | None = None,
                soft_ttl: int | None = None) -> Callable[[Callable[..., Any]], Any]:
    """The decorator behind ``target.cached_many(...)``: the function, ``fn(idents) ->
    {ident: value}``, is the key class's loader; calls go through ``get_many``."""
    is_async = _is_async(target)

    def decorate(fn: Callable[..., Mapping[Any, Any]]) -> Any:
        fn, kind = _unwrap(fn)
        if inspect.iscoroutinefunction(fn) and not is_async:
            raise UsageError(f"{fn.__qualname__} is async: decorate it with "
                             "AsyncTieredCache(cache).cached_many(...)")
        loader = _headed_loader(fn) if kind in ("method", "class") else fn
        kc = target.key_class(name or class_name(fn), loader, codec=codec,
                              compression=compression, threshold=threshold, ttl=ttl, l1=l1,
                              namespace=namespace, soft_ttl=soft_ttl)
        return (AsyncCachedMany if is_async else CachedMany)(target, fn, kc, kind)

    return decorate
