"""Key classes and the memcached keys of their idents, namespaces and their versions.

A key is ``<prefix>:<class>[@<version>]:<typed ident>`` when the typed ident is short and made
of safe characters, else ``...:#<blake2b of it>``: anything a caller passes as an ident can
therefore never reach the wire as a command. Keys are memoised per key class (``ident -> key``)
for the namespace version in use.

The typed ident (:func:`ident_text`) carries the ident's type, so idents that differ in Python
differ in memcached: ``1`` is ``i:1``, ``"1"`` is ``s:1``, ``None`` is ``n:``, ``"None"`` is
``s:None``, ``b"1"`` is ``b:1``, ``1.5`` is ``f:1.5``; tuples and frozensets are built from their
items' typed forms (and hashed, their brackets not being safe characters); any other type is
``o:<module.qualname>:<str()>``. Idents Python itself treats as one dict key — ``1``, ``1.0``,
``True``, ``Decimal(1)`` — are one ident here too (all ``i:1``): L1, request scopes and the
loader's answer are dicts keyed by ident, so giving them different memcached keys would let
``invalidate(kc, 1)`` miss the copy ``get(kc, 1.0)`` reads.

A versioned namespace's version is a counter in memcached (``<prefix>:ns:<namespace>``) that
is part of every key of the namespace; this process rereads it at most every ``refresh``
seconds. Bumping it (:meth:`Keyring.bump`) changes every key of the namespace at once.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import cachelab._core as _core
from cachelab.errors import ServerError, UsageError
from cachelab.tiered.backends import Tier
from cachelab.tiered.breaker import CircuitBreaker
from cachelab.tiered.checks import (
    soft_ttl_seconds,
    ttl_seconds,
    unhashable_ident,
    unhashable_in,
    unstable_ident,
)
from cachelab.tiered.codecs import Encoded, Stamp, ValueFormat

__all__ = ["KeyClass", "Keyring", "Loader", "RandomPrefixWarning", "ident_text"]

#: The type of a key class's values (what its loader returns per ident).
T = TypeVar("T")

#: ``loader(idents) -> {ident: object}``; idents it leaves out are "not found" (not cached).
#: Generic in the value type: ``Loader[User]``; plain ``Loader`` is ``Loader[Any]``.
Loader = Callable[[list[Any]], Mapping[Any, T]]

_SAFE = re.compile(r"[A-Za-z0-9_.\-:/]+")
_NAME = re.compile(r"[A-Za-z0-9_\-]{1,40}")
_MAX_KEY = 250
#: Memcached keys remembered per key class (ident -> key); beyond this the memo is cleared.
_KEY_MEMO = 100_000


def ident_text(ident: Any) -> str:
    """``ident`` with its type: distinct for idents that differ as dict keys, equal for those
    Python treats as equal (see the module docstring)."""
    t = type(ident)
    if t is str:
        return "s:" + ident
    if t is int:
        return f"i:{ident}"
    if ident is None:
        return "n:"
    if isinstance(ident, bool):
        return f"i:{int(ident)}"
    if isinstance(ident, str):  # a str subclass (StrEnum) equals its str
        return "s:" + str.__str__(ident)
    if isinstance(ident, int):  # an IntEnum equals its int
        return f"i:{int.__index__(ident)}"
    if isinstance(ident, (bytes, bytearray)):
        return "b:" + bytes(ident).decode("latin-1")  # one char per byte: injective
    if isinstance(ident, tuple):
        return "t:(" + "".join(_sized(ident_text(x)) for x in ident) + ")"
    if isinstance(ident, frozenset):
        return "z:{" + "".join(sorted(_sized(ident_text(x)) for x in ident)) + "}"
    if isinstance(ident, numbers.Number):
        try:
            if ident == int(ident):  # type: ignore[call-overload]
                return f"i:{int(ident)}"  # type: ignore[call-overload]
            if ident == float(ident):  # type: ignore[arg-type]
                return "f:" + repr(float(ident))  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):  # complex, nan, inf
            if isinstance(ident, float):
                return "f:" + repr(ident)
    return f"o:{t.__module__}.{t.__qualname__}:{ident}"


def _addressed(ident: Any) -> bool:
    """Whether ``ident``'s text is ``object``'s default (its memory address), which differs in
    every process: a key made of it would never be shared, nor found again after a restart."""
    if isinstance(ident, (tuple, frozenset)):
        return any(_addressed(x) for x in ident)
    t = type(ident)
    return t.__str__ is object.__str__ and t.__repr__ is object.__repr__


def _sized(text: str) -> str:
    """``text`` with its length in front, so that a sequence of them reads one way only."""
    return f"{len(text)}:{text}"


@dataclass(frozen=True, eq=False)
class KeyClass(Generic[T]):
    """A family of keys with one loader, one value format, one TTL. Made by
    :meth:`TieredCache.key_class <cachelab.tiered.TieredCache.key_class>`; generic in the
    loader's value type, so ``cache.get(users, 1)`` is typed ``User | None``.

    ``soft_ttl`` (seconds, less than ``ttl``; None: off) turns on stale-while-revalidate
    (:mod:`cachelab.tiered.swr`): a value is fresh for ``soft_ttl``, then served stale while one
    caller reloads it, until ``ttl``."""

    name: str
    loader: Loader[T]
    format: ValueFormat
    ttl: int
    l1: bool
    namespace: str | None
    soft_ttl: int | None = None
    #: In L1 and not versioned: an L1 hit needs no namespace version (the hit path's test).
    plain_l1: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "plain_l1", self.l1 and self.namespace is None)

    def __repr__(self) -> str:
        soft = "" if self.soft_ttl is None else f", soft_ttl={self.soft_ttl}"
        return f"KeyClass({self.name!r}, {self.format!r}, ttl={self.ttl}{soft}, l1={self.l1})"

    def encode(self, obj: Any) -> Encoded:
        """``obj`` as stored in memcached: its format's encoding, with a stamp in front when
        the class has a ``soft_ttl`` (stale from ``soft_ttl`` seconds on, gone at ``ttl``)."""
        enc = self.format.encode(obj)
        soft = self.soft_ttl
        if soft is None:
            return enc
        now = time.time()
        ttl = self.ttl
        stamp = Stamp(now + min(soft, ttl) if ttl else now + soft,
                      now + ttl if ttl else math.inf)
        return Encoded(stamp.pack(enc.data), enc.flags, enc.plain_size)


class RandomPrefixWarning(UserWarning):
    """A cache with a memcached tier was made without ``prefix``: its keys start with a random
    one, so no other process (nor this one after a restart) shares its entries."""


def with_ttl(kc: KeyClass[T], ttl: float | None) -> KeyClass[T]:
    """``kc``, or a copy that stores with ``ttl`` (same name, loader, format, keys); ``ttl``
    is checked and rounded up to whole seconds (:func:`~cachelab.tiered.checks.ttl_seconds`)."""
    if ttl is None:
        return kc
    seconds = ttl_seconds(ttl)
    return kc if seconds == kc.ttl else replace(kc, ttl=seconds)


class Keyring:
    """One cache's key classes, the memcached keys of their idents, and the versions of their
    namespaces. ``prefix`` starts every key; without it a unique one is made
    (``cachelab:<12 hex>``)."""

    def __init__(self, prefix: str | None, refresh: float) -> None:
        prefix = prefix if prefix is not None else f"cachelab:{secrets.token_hex(6)}"
        if not _SAFE.fullmatch(prefix) or len(prefix) > 100:
            raise UsageError(
                f"prefix {prefix!r}: 1-100 characters of letters, digits and _ . - : /"
            )
        self.prefix = prefix
        #: Seconds a namespace version is used before it is read from memcached again.
        self.refresh = refresh
        self.classes: dict[str, KeyClass] = {}
        #: Per key class: (namespace version, {ident: memcached key}) for the version in use.
        self._memos: dict[str, tuple[int, dict[Any, str]]] = {}
        #: Per namespace: (version, when it was read).
        self._ns: dict[str, tuple[int, float]] = {}

    # -- key classes --------------------------------------------------------------------------

    def register(
        self, name: str, loader: Loader[T], codec: str, compression: str, threshold: int,
        ttl: int, l1: bool, namespace: str | None, soft_ttl: int | None = None,
    ) -> KeyClass[T]:
        """A new key class (see :meth:`cachelab.tiered.TieredCache.key_class`)."""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise UsageError(f"key class name {name!r}: 1-40 letters, digits, _ or -")
        if namespace is not None and (not isinstance(namespace, str)
                                      or not _NAME.fullmatch(namespace)):
            raise UsageError(f"namespace {namespace!r}: 1-40 letters, digits, _ or -")
        if name in self.classes:
            raise UsageError(f"key class {name!r} is already registered")
        ttl = ttl_seconds(ttl)
        soft = soft_ttl_seconds(soft_ttl, ttl)
        if not callable(loader):
            raise TypeError(f"key class {name!r}: loader must be a function of a list of "
                            f"idents returning {{ident: value}}, got {type(loader).__qualname__}")
        kc = KeyClass(name, loader, ValueFormat(codec, compression, threshold), ttl, l1,
                      namespace, soft)
        self.classes[name] = kc
        return kc

    # -- keys ---------------------------------------------------------------------------------

    def key_for(self, kc: KeyClass, ident: Any, version: int) -> str:
        """The memcached key of ``ident`` under namespace ``version`` (0 if not versioned)."""
        memo = self._memo(kc.name, version)
        try:
            key = memo.get(ident)
        except TypeError:
            raise unhashable_ident(kc.name, ident, "TieredCache.key_for") from None
        if key is None:
            key = self._make_key(kc, ident, version, memo)
        return key

    def keys_of(self, kc: KeyClass, idents: list[Any], version: int) -> list[str]:
        """The memcached keys of ``idents``, in their order (memo lookups run in C)."""
        memo = self._memo(kc.name, version)
        try:
            keys = list(map(memo.get, idents))
        except TypeError:
            unhashable_in(kc.name, idents)
            raise
        if not all(keys):  # keys are never empty: a falsy one is a None, not memoised yet
            make = self._make_key
            keys = [k or make(kc, i, version, memo) for k, i in zip(keys, idents)]
        return keys

    def _memo(self, name: str, version: int) -> dict[Any, str]:
        """The ident -> key memo of a class at ``version`` (a new version starts a new one)."""
        m = self._memos.get(name)
        if m is None or m[0] != version:
            m = self._memos[name] = (version, {})
        return m[1]

    def _make_key(self, kc: KeyClass, ident: Any, version: int, memo: dict[Any, str]) -> str:
        if kc.namespace is not None:
            head = f"{self.prefix}:{kc.name}@{version}:"
        else:
            head = f"{self.prefix}:{kc.name}:"
        text = ident_text(ident)
        if "o:" in text and _addressed(ident):
            raise unstable_ident(kc.name, ident)
        if _SAFE.fullmatch(text) and len(head) + len(text) <= _MAX_KEY:
            key = head + text
        else:
            raw = text.encode("utf-8", "surrogatepass")
            key = head + "#" + hashlib.blake2b(raw, digest_size=20).hexdigest()
        _core.validate_key(key)
        if len(memo) >= _KEY_MEMO:
            memo.clear()
        memo[ident] = key
        return key

    # -- namespaces ---------------------------------------------------------------------------

    def ns_key(self, namespace: str) -> str:
        """The memcached key of ``namespace``'s version counter."""
        return f"{self.prefix}:ns:{namespace}"

    def ns_version(self, namespace: str, l2: Tier | None, breaker: CircuitBreaker) -> int:
        """``namespace``'s version: the one read less than ``refresh`` seconds ago, else the
        counter in ``l2`` (made, at a random start, if missing). While ``l2`` cannot be read,
        the last version known (0 at first)."""
        cached = self._ns.get(namespace)
        now = time.monotonic()
        if cached is not None and now - cached[1] < self.refresh:
            return cached[0]
        version = cached[0] if cached else 0
        if l2 is not None and breaker.allow():
            key = self.ns_key(namespace)
            try:
                got = l2.get_multi([key])
                breaker.success()
                raw = got.get(key)
                if raw is None:
                    # A random start: if the counter is ever evicted, the keys written under
                    # the old version do not come back.
                    l2.set(key, str(secrets.randbits(31)).encode(), 0, 0)
                    raw = l2.get_multi([key]).get(key, b"0")
                version = int(raw)
            except (ServerError, ValueError):
                breaker.failure()
        self._ns[namespace] = (version, now)
        return version

    def bump(self, namespace: str, l2: Tier | None) -> int:
        """Moves ``namespace`` to a new version and returns it: the counter in ``l2`` (raises
        ServerError if it cannot be reached), or a local one without ``l2``."""
        if l2 is None:
            v = self._ns.get(namespace, (0, 0.0))[0] + 1
        else:
            v = l2.incr_or_add(self.ns_key(namespace))
        self._ns[namespace] = (v, time.monotonic())
        return v
