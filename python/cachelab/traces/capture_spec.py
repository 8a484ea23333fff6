"""What a capture of a live memcached's key stream does and when it stops
(:class:`CaptureSpec`), apart from :mod:`cachelab.traces.capture` so that the command line
reads its defaults without loading the capture itself."""

from __future__ import annotations

from dataclasses import dataclass

from cachelab.errors import UsageError
from cachelab.units import check_limit, limited, limits_of

__all__ = ["LIMITS", "READERS", "CaptureSpec"]

#: The stream readers: the Rust one (``cachelab._core.CaptureReader``, the default) and
#: the Python one it matches (:mod:`cachelab.traces.capture_lines`).
READERS = ("rust", "python")


@dataclass(frozen=True)
class CaptureSpec:
    """What to capture and when to stop: ``server``, or a pool's ``servers`` (each member
    watched at once, merged by time)."""

    server: str = ""
    #: Seconds to capture (at most a week).
    duration: float = limited(60.0, 0.0, 7 * 86_400.0, above=True, unit="seconds")
    #: Stop after this many accesses written.
    max_events: int = limited(50_000_000, 1, 10**10)
    #: Stop after this many bytes of the server's stream (whole MiB: ``--max-mb``).
    max_bytes: int = limited(8 * 2**30, 2**20, 2**40, unit="bytes")
    #: The share of keys kept (all accesses of a key or none), in (0, 1].
    sample: float = limited(1.0, 0.0, 1.0, above=True)
    #: Write the keys as they are rather than pseudonymised.
    keep_keys: bool = False
    connect_timeout: float = limited(2.0, 0.0, 60.0, above=True, unit="seconds")
    #: A pool's members (HOST:PORT or unix:PATH each), instead of ``server``.
    servers: tuple[str, ...] = ()
    #: The stream reader: ``rust`` or ``python`` (:data:`READERS`).
    reader: str = "rust"
    #: The Rust reader's cap on the stream read from the server and not parsed yet (its
    #: drain thread reads as fast as the server writes; a parser or writer that falls this
    #: far behind stops the capture, ``max_buffer``, rather than let the server drop lines).
    max_buffer: int = limited(2**30, 2**20, 2**40, unit="bytes")
    #: Keep the server's logger thread awake (the Rust reader: a second watcher, of connection
    #: events, and a connection opened and closed every 10 ms while the stream is quiet), so
    #: that a burst after a quiet spell does not overflow its worker threads' log buffers
    #: (docs/traces.md).
    wake: bool = True

    @property
    def members(self) -> tuple[str, ...]:
        return tuple(self.servers) if self.servers else (self.server,)

    def check(self) -> None:
        """UsageError naming the first bad field."""
        if bool(self.server) == bool(self.servers):
            raise UsageError("give a server or a pool's servers, not both or neither")
        if len(set(self.members)) != len(self.members) or len(self.members) > 127:
            raise UsageError("a pool's servers must differ, and be at most 127")
        if self.reader not in READERS:
            raise UsageError(f"reader {self.reader!r}: {' or '.join(READERS)}")
        for name, limit in LIMITS.items():
            check_limit(name, limit, getattr(self, name))
        for server in self.members:
            if server.startswith("unix:"):
                continue
            host, sep, port = server.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise UsageError(f"server {server!r} is not HOST:PORT or unix:PATH")


#: The range of each numeric field (the flags' too).
LIMITS = limits_of(CaptureSpec)
