"""Checks at the boundary of :mod:`cachelab.tiered`: what a caller passes (key classes, idents,
TTLs) and what a loader returns, turned into one-line errors that name the argument, what is
allowed and what came instead.

They run where they are cheap: once per call (the key class, the TTL, the idents of a
``get_many``), once per loader call (its result), once per ident the key ring makes a key for
(memoised); never per ident on an L1 hit. The callers test the common case inline (``type(kc)
is KeyClass``, ``type(loaded) is dict``) and come here only for the rest.
"""

from __future__ import annotations

import datetime
import math
import numbers
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn

from cachelab.errors import UsageError

__all__ = ["LoaderKeysWarning", "bad_key_class", "foreign_keys", "hashable", "idents_list",
           "loaded_mapping", "short", "soft_ttl_seconds", "ttl_seconds", "unhashable_ident",
           "unhashable_in", "unstable_ident"]

#: Longest memcached TTL this library accepts: memcached reads a larger number as a Unix time.
MAX_TTL = 30 * 86400


def short(obj: Any, limit: int = 60) -> str:
    """``repr(obj)``, cut to ``limit`` characters (a repr that fails says so)."""
    try:
        text = repr(obj)
    except Exception as e:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = f"<{type(obj).__name__} whose repr failed: {type(e).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _what(obj: Any) -> str:
    """``a list [1, 2]``: the type and a short repr of what came."""
    return f"{type(obj).__qualname__} {short(obj)}"


def bad_key_class(where: str, kc: Any) -> NoReturn:
    """Raises the TypeError for ``kc`` (not a KeyClass) passed to ``where``."""
    hint = ""
    if hasattr(kc, "key_class") and hasattr(kc, "__wrapped__"):
        hint = " (this is a cached function: pass its .key_class)"
    raise TypeError(f"{where}: kc must be a KeyClass made by cache.key_class(name, loader), "
                    f"got {_what(kc)}{hint}")


def ttl_seconds(ttl: Any, name: str = "ttl") -> int:
    """``ttl`` as whole seconds for memcached: an int from 0 (no expiry) to 30 days; a
    fractional number or a :class:`datetime.timedelta` is rounded *up* (``0.5`` -> ``1``: never
    down to 0, which memcached reads as "never expires"). TypeError for anything else (bool,
    str, None where a number is needed), UsageError outside the range or for nan/inf."""
    t = type(ttl)
    if t is int:
        seconds = ttl
    elif isinstance(ttl, datetime.timedelta):
        seconds = math.ceil(ttl.total_seconds())
    elif isinstance(ttl, numbers.Real) and not isinstance(ttl, bool):
        try:
            seconds = math.ceil(ttl)
        except (ValueError, OverflowError):  # nan, inf
            raise UsageError(f"{name} must be a finite number of seconds, got {short(ttl)}") \
                from None
    else:
        raise TypeError(f"{name} must be whole seconds (an int from 0 to {MAX_TTL}; a fraction "
                        f"is rounded up) or None, got {_what(ttl)}")
    if not 0 <= seconds <= MAX_TTL:
        raise UsageError(f"{name} must be 0 (none) to 30 days in seconds ({MAX_TTL}), "
                         f"got {short(ttl)}")
    return seconds


def soft_ttl_seconds(soft_ttl: Any, ttl: int) -> int | None:
    """A key class's ``soft_ttl`` (stale-while-revalidate) as whole seconds, or None: checked
    and rounded up as ``ttl`` is (:func:`ttl_seconds`), then at least 1 s and less than the
    class's (hard) ``ttl``, which must not be 0."""
    if soft_ttl is None:
        return None
    soft = ttl_seconds(soft_ttl, "soft_ttl")
    if soft < 1:
        raise UsageError(f"soft_ttl must be at least 1 s (0 would make every value stale at "
                         f"once), got {short(soft_ttl)}; None turns it off")
    if ttl == 0:
        raise UsageError("soft_ttl needs a hard ttl: with ttl=0 (no expiry) a stale value could "
                         "be served forever; give ttl > soft_ttl")
    if soft >= ttl:
        raise UsageError(f"soft_ttl must be less than ttl: values are fresh for soft_ttl, then "
                         f"served stale while one caller reloads them, up to ttl; got "
                         f"soft_ttl={short(soft_ttl)}, ttl={ttl}")
    return soft


def idents_list(where: str, kc_name: str, idents: Iterable[Any]) -> list[Any]:
    """``idents`` as a list for ``get_many``: refuses a str or bytes (its characters would be
    read as idents) and what is not iterable, naming the key class."""
    if isinstance(idents, (str, bytes, bytearray)):
        raise TypeError(f"{where}(key class {kc_name!r}): idents must be a list (or other "
                        f"iterable) of idents, got the {type(idents).__name__} "
                        f"{short(idents)}; for one ident pass [ident] or use get()")
    try:
        return list(idents)
    except TypeError:
        if hasattr(idents, "__iter__"):
            raise  # an iterator that failed inside: its own error
        raise TypeError(f"{where}(key class {kc_name!r}): idents must be a list (or other "
                        f"iterable) of idents, got {_what(idents)}") from None


def unhashable_ident(kc_name: str, ident: Any, where: str | None = None) -> TypeError:
    """The TypeError for an ident the key class cannot key (it cannot be hashed), naming the
    method it was passed to (``where``, e.g. ``"TieredCache.get"``), the ident and its type."""
    what = (f"ident {short(ident)} ({type(ident).__qualname__}) is not hashable: an ident is "
            "an int, str, bytes, float, None, or a tuple or frozenset of them")
    if where is None:
        return TypeError(f"key class {kc_name!r}: {what}")
    return TypeError(f"{where}: {what} (key class {kc_name!r})")


def unhashable_in(kc_name: str, idents: Iterable[Any], where: str | None = None) -> None:
    """Raises :func:`unhashable_ident`'s error for the first ident of ``idents`` that cannot
    be hashed (after a TypeError, to tell whether that was the cause); else returns."""
    for i in idents:
        try:
            hash(i)
        except TypeError:
            raise unhashable_ident(kc_name, i, where) from None


def hashable(where: str, kc_name: str, ident: Any) -> None:
    """Raises :func:`unhashable_ident`'s error if ``ident`` cannot be hashed (a write checks
    its one ident first: cheap beside its round trip)."""
    try:
        hash(ident)
    except TypeError:
        raise unhashable_ident(kc_name, ident, where) from None


def unstable_ident(kc_name: str, ident: Any) -> UsageError:
    """The error for an ident whose text would differ in every process (its type has neither
    ``__str__`` nor ``__repr__`` of its own: the text is its memory address)."""
    return UsageError(f"key class {kc_name!r}: ident {short(ident)} of type "
                      f"{type(ident).__qualname__} has no stable text (its str() is its "
                      "address, different in every process): use an int, str, bytes or a "
                      "tuple of them, or give the type a __str__")


def _loader_name(loader: Callable[..., Any]) -> str:
    fn = getattr(loader, "async_loader", loader)  # an async loader behind its sync bridge
    mod = getattr(fn, "__module__", None)
    qual = getattr(fn, "__qualname__", None) or short(fn)
    return f"{mod}.{qual}" if mod and mod != "builtins" else qual


def loaded_mapping(kc: Any, loaded: Any) -> Mapping[Any, Any]:
    """``loaded`` if the loader of ``kc`` returned a mapping (``{ident: value}``), else a
    TypeError naming the loader, the shape expected and what came back."""
    if type(loaded) is dict or isinstance(loaded, Mapping):
        return loaded  # type: ignore[no-any-return]
    hint = ""
    if isinstance(loaded, (list, tuple)) and loaded and all(
            isinstance(p, tuple) and len(p) == 2 for p in loaded[:8]):
        hint = " (pairs? return dict(pairs))"
    elif isinstance(loaded, (list, tuple)):
        hint = " (values in order? return dict(zip(idents, values)))"
    elif loaded is None:
        hint = " (a loader that finds nothing returns {})"
    elif hasattr(loaded, "__next__") or isinstance(loaded, (set, frozenset)):
        hint = " (return a dict)"
    raise TypeError(f"loader {_loader_name(kc.loader)} of key class {kc.name!r} returned "
                    f"{_what(loaded)}: expected a mapping {{ident: value}} of the idents it "
                    f"was given (those it does not know left out){hint}")


class LoaderKeysWarning(UserWarning):
    """A loader returned values, none of them under an ident it was asked for (keyed by
    another type, e.g. ``"1"`` for ``1``): they are not used, every ident is a miss."""


def foreign_keys(kc: Any, idents: list[Any], loaded: Mapping[Any, Any]) -> None:
    """Warns (:class:`LoaderKeysWarning`) that the loader of ``kc`` returned ``loaded``, none
    of whose keys is among ``idents``, naming the loader, the type asked and the type
    returned (no values: Python's default filter shows each message once, so once per key
    class and pair of types)."""
    asked = type(idents[0]).__qualname__
    got = type(next(iter(loaded))).__qualname__
    if got == asked:
        got += " (other idents)"
    warnings.warn(
        f"loader {_loader_name(kc.loader)} of key class {kc.name!r} was asked for idents of "
        f"type {asked} and returned values under keys of type {got}, none of them an ident "
        "asked: they are not used (every ident is a miss); key the mapping by the idents the "
        "loader was given", LoaderKeysWarning, stacklevel=2)
