"""How values are stored in memcached: a codec (object -> bytes) and, above a size threshold, a
compressor — one registry table each, no chain of ifs on names.

A stored value is a 2-byte header and the payload::

    0xCB  format  payload...

``format`` is ``codec_id | compressor_id << 4``; the same byte is written as the memcached client
flags, so other tools can see how a value was encoded. Reads rely on the header (the text
protocol's multi-gets in ``cachelab._core.Client`` return values without flags), so a
value written by some other program under our prefix is refused instead of misread. An empty
value is never ours: it is a lease placeholder (see :mod:`cachelab.tiered.flight`) and reads as a
miss.

Codecs: ``raw`` (bytes as they are), ``msgpack`` (with extension types — the ``EXT_*`` codes
below — so tuples, sets, datetimes, decimals, UUIDs come back as themselves), ``orjson`` and
``pickle``. A value a codec cannot store raises :class:`UnencodableValue`, naming its type.
``pickle`` runs code chosen by whoever can write to the cache when it decodes; it is only used
when a key class names it explicitly. Compressors: ``none``, ``zlib``, ``zstd``, ``lz4`` (frame
format).

A value of a key class with a soft TTL (stale-while-revalidate, :mod:`cachelab.tiered.swr`)
carries a *stamp* in front of that: ``0xCC``, a flags byte (bit 0: a revalidation is under
way), then when the value turns stale and when it expires (``soft_at``, ``hard_at``: Unix
times, big-endian doubles; ``hard_at`` is inf for no expiry) — 18 bytes in all::

    0xCC  flags  soft_at  hard_at  0xCB  format  payload...

Every reader strips it (:meth:`ValueFormat.decode_sized`, :meth:`ValueFormat.decode_list`);
the soft expiry travels with the value, so every process sees the time its writer set. A
value without a stamp is fresh until memcached expires it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import pickle
import struct
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from cachelab.errors import UsageError

__all__ = [
    "CODECS",
    "COMPRESSORS",
    "MAGIC",
    "STAMP",
    "Stamp",
    "Codec",
    "Compressor",
    "CorruptValue",
    "Encoded",
    "UnencodableValue",
    "ValueFormat",
]

MAGIC = 0xCB
#: The first byte of a stamped value (see the module docstring).
STAMP = 0xCC
_STAMP = struct.Struct(">BBdd")
#: Bytes of a stamp in front of a value.
STAMP_LEN = _STAMP.size
_unpack_stamp = _STAMP.unpack_from
#: Where the payload of a stamped value starts (after the stamp and the 2-byte header).
_OWN_AT = STAMP_LEN + 2

# Lazy imports: the libraries behind the codecs and compressors (msgpack, orjson, zstandard,
# lz4) are imported when one is first instantiated (by the first ValueFormat naming it), not
# at module top: together they cost tens of milliseconds at import, and a process pays only
# for those its key classes use.


class CorruptValue(ValueError):
    """A stored value that is not in our format (no header, unknown codec, bad payload)."""


class UnencodableValue(UsageError, TypeError):
    """A value the key class's codec cannot store; the message names its type."""


class Codec(Protocol):
    id: int
    name: str
    #: ``payload -> object`` as one C-level call where the library allows (the same as
    #: ``decode``); None when the payload is the object (raw).
    loads: Any

    def encode(self, obj: Any) -> bytes: ...
    def decode(self, data: bytes) -> Any: ...


class Compressor(Protocol):
    id: int
    name: str

    def compress(self, data: bytes) -> bytes: ...
    def decompress(self, data: bytes) -> bytes: ...


class _Raw:
    id, name = 0, "raw"
    loads = None

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, (bytes, bytearray, memoryview)):
            raise UnencodableValue(f"the raw codec stores bytes, not {type(obj).__name__}")
        return bytes(obj)

    def decode(self, data: bytes) -> Any:
        return data


#: The msgpack extension types of the ``msgpack`` codec (application range 0-127): values of
#: these Python types come back as the same type from every tier. Codes are part of the stored
#: format: never reuse or renumber one.
EXT_TUPLE = 1  #: tuple (and its subclasses, as tuple): the items, as a msgpack array
EXT_SET = 2  #: set: its items, as a msgpack array
EXT_FROZENSET = 3  #: frozenset: its items, as a msgpack array
#: datetime: ``[year, month, day, hour, minute, second, microsecond, fold, zone]``; the zone is
#: nil (naive), a ZoneInfo's key, or a fixed UTC offset ``[days, seconds, microseconds]`` (with
#: the ``datetime.timezone``'s name appended when it has one of its own)
EXT_DATETIME = 4
EXT_DATE = 5  #: date: ``[year, month, day]``
EXT_TIME = 6  #: time: ``[hour, minute, second, microsecond, fold, zone]`` (zone as above)
EXT_TIMEDELTA = 7  #: timedelta: ``[days, seconds, microseconds]``
EXT_DECIMAL = 8  #: Decimal: ``str()``
EXT_UUID = 9  #: UUID: its 16 bytes
EXT_BIGINT = 10  #: int outside msgpack's 64 bits: decimal digits

_MSGPACK_TYPES = ("None, bool, int, float, str, bytes, bytearray, list, dict, tuple, set, "
                  "frozenset, datetime, date, time, timedelta, Decimal, UUID")


class _Msgpack:
    """msgpack, with extension types (the ``EXT_*`` codes above) so that tuples, sets,
    datetimes, decimals, UUIDs and big ints round-trip as themselves. Plain dict/list/str/int/
    float/bytes values never reach the Python hooks (``strict_types`` sends only the other types
    to ``default``; ``ext_hook`` runs only for extension types). Subclasses of the plain types
    (an ``IntEnum``, an ``OrderedDict``, a namedtuple) are stored as their base type."""

    id, name = 1, "msgpack"

    def __init__(self) -> None:
        import uuid  # deferred on purpose: ~5 ms (it imports platform), as msgpack below

        import msgpack  # deferred on purpose: see "Lazy imports" above

        ext = msgpack.ExtType
        packb, unpackb = msgpack.packb, msgpack.unpackb

        def loads(data: bytes) -> Any:
            return unpackb(data, raw=False, strict_map_key=False, ext_hook=ext_hook)

        def pack(obj: Any) -> bytes:  # nested values (inside an extension): a packer of their own
            return packb(obj, use_bin_type=True, strict_types=True, default=default)

        # One Packer per thread (a Packer reuses its buffer: 3x faster than packb on small
        # values, but not safe to share).
        local = threading.local()

        def encode(obj: Any) -> bytes:
            try:
                packer = local.packer
            except AttributeError:
                packer = local.packer = msgpack.Packer(use_bin_type=True, strict_types=True,
                                                       default=default)
            return packer.pack(obj)  # type: ignore[no-any-return]

        self.loads = loads
        self._encode = encode

        def zone(t: Any) -> Any:
            """The zone of a datetime or time, as EXT_DATETIME describes it."""
            tz = t.tzinfo
            if tz is None:
                return None
            key = getattr(tz, "key", None)  # zoneinfo.ZoneInfo: kept by name
            if isinstance(key, str):
                return key
            off = t.utcoffset()
            if off is None:
                raise UnencodableValue(f"a {type(t).__name__} whose tzinfo "
                                       f"{type(tz).__name__} gives no UTC offset")
            out = [off.days, off.seconds, off.microseconds]
            if isinstance(tz, dt.timezone) and tz != dt.timezone.utc:
                name = tz.tzname(None)
                if name != dt.timezone(off).tzname(None):
                    out.append(name)
            return out

        def zone_of(z: Any) -> Any:
            if z is None:
                return None
            if isinstance(z, str):
                # deferred on purpose: only values holding a ZoneInfo need it
                import zoneinfo

                return zoneinfo.ZoneInfo(z)
            return dt.timezone(dt.timedelta(*z[:3]), *z[3:])

        encoders: dict[type, Callable[[Any], Any]] = {
            tuple: lambda o: ext(EXT_TUPLE, pack(list(o))),
            set: lambda o: ext(EXT_SET, pack(list(o))),
            frozenset: lambda o: ext(EXT_FROZENSET, pack(list(o))),
            dt.datetime: lambda o: ext(EXT_DATETIME, pack(
                [o.year, o.month, o.day, o.hour, o.minute, o.second, o.microsecond, o.fold,
                 zone(o)])),
            dt.date: lambda o: ext(EXT_DATE, pack([o.year, o.month, o.day])),
            dt.time: lambda o: ext(EXT_TIME, pack(
                [o.hour, o.minute, o.second, o.microsecond, o.fold, zone(o)])),
            dt.timedelta: lambda o: ext(EXT_TIMEDELTA, pack([o.days, o.seconds,
                                                             o.microseconds])),
            decimal.Decimal: lambda o: ext(EXT_DECIMAL, str(o).encode()),
            uuid.UUID: lambda o: ext(EXT_UUID, o.bytes),
            int: lambda o: ext(EXT_BIGINT, str(o).encode()),
        }
        #: Subclasses of msgpack's own types (strict_types sends them here): their base type.
        bases = (bool, int, float, str, bytes, bytearray, list, dict, tuple, set, frozenset,
                 dt.datetime, dt.date, dt.time, dt.timedelta, decimal.Decimal, uuid.UUID)

        def default(obj: Any) -> Any:
            t = type(obj)
            enc = encoders.get(t)
            if enc is not None:  # (int: only those outside 64 bits reach this hook)
                return enc(obj)
            for base in bases:  # a subclass: stored as its base type
                if isinstance(obj, base):
                    if base in encoders:
                        return encoders[base](obj)
                    return base(obj)
            raise UnencodableValue(
                f"the msgpack codec cannot store a {t.__module__}.{t.__qualname__}; it "
                f"stores {_MSGPACK_TYPES} (or choose codec='pickle')")

        def datetime_of(data: bytes) -> dt.datetime:
            *parts, fold, z = loads(data)
            return dt.datetime(*parts, tzinfo=zone_of(z), fold=fold)

        def time_of(data: bytes) -> dt.time:
            *parts, fold, z = loads(data)
            return dt.time(*parts, tzinfo=zone_of(z), fold=fold)

        decoders: dict[int, Callable[[bytes], Any]] = {
            EXT_TUPLE: lambda d: tuple(loads(d)),
            EXT_SET: lambda d: set(loads(d)),
            EXT_FROZENSET: lambda d: frozenset(loads(d)),
            EXT_DATETIME: datetime_of,
            EXT_DATE: lambda d: dt.date(*loads(d)),
            EXT_TIME: time_of,
            EXT_TIMEDELTA: lambda d: dt.timedelta(*loads(d)),
            EXT_DECIMAL: lambda d: decimal.Decimal(d.decode()),
            EXT_UUID: lambda d: uuid.UUID(bytes=d),
            EXT_BIGINT: lambda d: int(d),
        }
        def ext_hook(code: int, data: bytes) -> Any:
            dec = decoders.get(code)
            if dec is None:
                return ext(code, data)  # not ours: left as msgpack's ExtType
            return dec(data)

    def encode(self, obj: Any) -> bytes:
        try:
            return self._encode(obj)
        except UnencodableValue:
            raise
        except (TypeError, ValueError, OverflowError) as e:  # e.g. a str with a lone surrogate
            raise UnencodableValue(
                f"the msgpack codec cannot store this {type(obj).__name__}: {e}") from e

    def decode(self, data: bytes) -> Any:
        return self.loads(data)


class _Orjson:
    id, name = 2, "orjson"

    def __init__(self) -> None:
        import orjson  # deferred on purpose: see "Lazy imports" above

        self._dumps, self._loads = orjson.dumps, orjson.loads
        self.loads = orjson.loads

    def encode(self, obj: Any) -> bytes:
        return self._dumps(obj)

    def decode(self, data: bytes) -> Any:
        return self._loads(data)


class _Pickle:
    id, name = 3, "pickle"
    loads = staticmethod(pickle.loads)

    def encode(self, obj: Any) -> bytes:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)

    def decode(self, data: bytes) -> Any:
        return pickle.loads(data)  # noqa: S301 - opt-in, see the module docstring


class _NoCompression:
    id, name = 0, "none"

    def compress(self, data: bytes) -> bytes:
        return data

    def decompress(self, data: bytes) -> bytes:
        return data


class _Zlib:
    id, name = 1, "zlib"

    def __init__(self, level: int = 6) -> None:
        self.level = level

    def compress(self, data: bytes) -> bytes:
        return zlib.compress(data, self.level)

    def decompress(self, data: bytes) -> bytes:
        return zlib.decompress(data)


class _Zstd:
    id, name = 2, "zstd"

    def __init__(self, level: int = 3) -> None:
        import zstandard  # deferred on purpose: see "Lazy imports" above

        self._c = zstandard.ZstdCompressor(level=level)
        self._d = zstandard.ZstdDecompressor()

    def compress(self, data: bytes) -> bytes:
        return self._c.compress(data)

    def decompress(self, data: bytes) -> bytes:
        return self._d.decompress(data)


class _Lz4:
    id, name = 3, "lz4"

    def __init__(self) -> None:
        import lz4.frame  # deferred on purpose: see "Lazy imports" above

        self._frame = lz4.frame

    def compress(self, data: bytes) -> bytes:
        return self._frame.compress(data)

    def decompress(self, data: bytes) -> bytes:
        return self._frame.decompress(data)


#: Codec classes by name (instantiated lazily: their libraries are imported on first use).
CODECS: dict[str, type] = {c.name: c for c in (_Raw, _Msgpack, _Orjson, _Pickle)}
#: Compressor classes by name.
COMPRESSORS: dict[str, type] = {c.name: c for c in (_NoCompression, _Zlib, _Zstd, _Lz4)}

_CODEC_BY_ID: dict[int, Codec] = {}
_COMPRESSOR_BY_ID: dict[int, Compressor] = {}


def _codec(name: str) -> Codec:
    cls = CODECS.get(name)
    if cls is None:
        raise UsageError(f"unknown codec {name!r}; choose one of {', '.join(CODECS)}")
    if cls.id not in _CODEC_BY_ID:
        _CODEC_BY_ID[cls.id] = cls()
    return _CODEC_BY_ID[cls.id]


def _compressor(name: str) -> Compressor:
    cls = COMPRESSORS.get(name)
    if cls is None:
        raise UsageError(
            f"unknown compression {name!r}; choose one of {', '.join(COMPRESSORS)}"
        )
    if cls.id not in _COMPRESSOR_BY_ID:
        _COMPRESSOR_BY_ID[cls.id] = cls()
    return _COMPRESSOR_BY_ID[cls.id]


@dataclass(frozen=True)
class Encoded:
    """A value ready for memcached, and what it took."""

    data: bytes
    flags: int
    #: Length of the codec's output before compression (the L1 weight of the object).
    plain_size: int


class Stamp(NamedTuple):
    """A stamped value's times (see the module docstring): stale from ``soft_at``, gone from
    ``hard_at`` (Unix times); ``revalidating`` while a caller that claimed it reloads it (its
    ``soft_at`` is then when that claim lapses and another caller may try). A named tuple:
    one is made per stamped value read."""

    soft_at: float
    hard_at: float
    revalidating: bool = False

    def pack(self, data: bytes) -> bytes:
        """``data`` (an unstamped value) with this stamp in front."""
        return _STAMP.pack(STAMP, int(self.revalidating), self.soft_at, self.hard_at) + data


def read_stamp(data: bytes) -> tuple[Stamp | None, bytes]:
    """(its stamp, the value without it) of a stored value; (None, ``data``) when it has none."""
    if len(data) < STAMP_LEN or data[0] != STAMP:
        return None, data
    _, flags, soft_at, hard_at = _unpack_stamp(data)
    return Stamp(soft_at, hard_at, flags & 1 == 1), data[STAMP_LEN:]


class ValueFormat:
    """One key class's way of storing values: a codec, and a compressor used for encoded values
    of at least ``threshold`` bytes when it makes them smaller."""

    def __init__(self, codec: str = "msgpack", compression: str = "none", threshold: int = 1024):
        if threshold < 0:
            raise UsageError(f"compression threshold must be 0 or more, got {threshold}")
        self.codec = _codec(codec)
        self.compressor = _compressor(compression)
        self.threshold = threshold
        self._own = self.codec.id  # the format byte of an uncompressed value of this codec
        #: The header of an uncompressed value of this format's own codec: what a multi-get
        #: strips (``_core.Client.get_multi_list``) before :attr:`loads` reads the rest.
        self.own_header = bytes((MAGIC, self._own))
        #: The header of an uncompressed raw value (None for other codecs).
        self.raw_header = self.own_header if self.codec.id == 0 else None
        #: The codec's ``payload -> object`` for payloads after :attr:`own_header`; None for
        #: raw (the payload is the object).
        self.loads = self.codec.loads

    def __repr__(self) -> str:
        return (
            f"ValueFormat({self.codec.name!r}, {self.compressor.name!r}, "
            f"threshold={self.threshold})"
        )

    def encode(self, obj: Any) -> Encoded:
        plain = self.codec.encode(obj)
        comp = 0
        payload = plain
        if self.compressor.id and len(plain) >= self.threshold:
            packed = self.compressor.compress(plain)
            if len(packed) < len(plain):
                payload, comp = packed, self.compressor.id
        fmt = self.codec.id | comp << 4
        return Encoded(bytes((MAGIC, fmt)) + payload, fmt, len(plain))

    def decode(self, data: bytes) -> Any:
        """The object in ``data`` (see :meth:`decode_sized`)."""
        return self.decode_sized(data)[0]

    def decode_sized(self, data: bytes) -> tuple[Any, int]:
        """(object, plain size) of a value in our format, whichever codec wrote it (the header
        says how) — except pickle, refused unless this format's own codec is pickle."""
        if data[:1] == b"\xcc":  # a stamp (stale-while-revalidate): the value follows it
            data = read_stamp(data)[1]
        if len(data) < 2 or data[0] != MAGIC:
            raise CorruptValue("not a cachelab.tiered value (no header)")
        fmt = data[1]
        if fmt & 0x0F == _Pickle.id and self.codec.id != _Pickle.id:
            raise CorruptValue("a pickled value where this key class does not allow pickle")
        if fmt == self._own:
            plain = data[2:]
            if fmt == 0:  # raw: the bytes are the object
                return plain, len(plain)
            try:
                return self.codec.decode(plain), len(plain)
            except Exception as e:
                raise CorruptValue(f"{self.codec.name} payload does not decode: {e}") from e
        codec = _CODEC_BY_ID.get(fmt & 0x0F)
        comp = _COMPRESSOR_BY_ID.get(fmt >> 4)
        if codec is None or comp is None:
            codec = codec or _codec_by_id(fmt & 0x0F)
            comp = comp or _compressor_by_id(fmt >> 4)
        try:
            plain = comp.decompress(data[2:]) if comp.id else data[2:]
            return codec.decode(plain), len(plain)
        except Exception as e:  # any library's decode error: the bytes are not what we wrote
            raise CorruptValue(f"{codec.name}/{comp.name} payload does not decode: {e}") from e

    def decode_list(
        self, idents: list[Any], values: list[bytes | None], found: int, others: list[int],
        nbytes: int, objs: dict, sizes: dict, stamps: dict | None = None,
    ) -> tuple[int, int, int]:
        """Fills ``objs`` and ``sizes`` (plain sizes) from a multi-get's ``values``, aligned with
        ``idents`` as :meth:`Tier.get_list <cachelab.tiered.backends.Tier.get_list>` answers
        with ``strip=``:attr:`own_header`: ``found`` values, those at ``others`` still with
        their header, the rest without it (``nbytes`` of them, headers included). Values in
        this format's own uncompressed form are read with one C-level ``map``; an empty one is
        a lease placeholder (a miss). Stamped values (stale-while-revalidate) are among the
        others: their :class:`Stamp` goes to ``stamps[ident]`` when ``stamps`` is given.
        Returns (hits, bytes read of the hits, corrupt values)."""
        corrupt = 0
        rest = [(idents[x], values[x]) for x in others]
        if rest:
            values = values.copy()
            for x in others:
                values[x] = None
        if found - len(rest) == len(idents):
            plain_ids: list[Any] = idents
            payloads: list[Any] = values
        else:
            plain_ids = [i for i, v in zip(idents, values) if v is not None]
            payloads = [v for v in values if v is not None]
        hits = len(payloads)
        loads = self.loads
        if loads is None:
            objs.update(zip(plain_ids, payloads))
        else:
            try:
                objs.update(zip(plain_ids, map(loads, payloads)))
            except Exception:  # some payload is not what we wrote: find which, one by one
                objs.clear()
                for i, p in zip(plain_ids, payloads):
                    try:
                        objs[i] = loads(p)
                    except Exception:
                        corrupt += 1
                        hits -= 1
                        nbytes -= len(p) + len(self.own_header)
        sizes.update(zip(plain_ids, map(len, payloads)))
        decode = self.decode_sized
        own = self.own_header
        for i, data in rest:
            if not data:  # a lease placeholder: a miss
                continue
            size = len(data)
            if stamps is not None and data[0] == STAMP and size > _OWN_AT:
                _, flags, soft_at, hard_at = _unpack_stamp(data)
                stamps[i] = Stamp(soft_at, hard_at, flags & 1 == 1)
                if loads is not None and data[STAMP_LEN:_OWN_AT] == own:
                    # the class's own uncompressed format behind the stamp: read at once
                    try:
                        objs[i] = loads(data[_OWN_AT:])
                    except Exception:
                        del stamps[i]
                        corrupt += 1
                        continue
                    sizes[i] = size - _OWN_AT
                    hits += 1
                    nbytes += size
                    continue
                data = data[STAMP_LEN:]
            try:
                objs[i], sizes[i] = decode(data)
            except CorruptValue:
                if stamps is not None:
                    stamps.pop(i, None)
                corrupt += 1
                continue
            hits += 1
            nbytes += size
        if len(sizes) > len(objs):  # drop the sizes of corrupt payloads
            for i in [i for i in sizes if i not in objs]:
                del sizes[i]
        return hits, nbytes, corrupt


def _codec_by_id(i: int) -> Codec:
    for name, cls in CODECS.items():
        if cls.id == i:
            return _codec(name)
    raise CorruptValue(f"unknown codec id {i}")


def _compressor_by_id(i: int) -> Compressor:
    for name, cls in COMPRESSORS.items():
        if cls.id == i:
            return _compressor(name)
    raise CorruptValue(f"unknown compressor id {i}")
