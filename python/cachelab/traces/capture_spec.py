"""What a capture of a live memcached's key stream does and when it stops
(:class:`CaptureSpec`), apart from :mod:`cachelab.traces.capture` so that the command line
reads its defaults without loading the capture itself."""

from __future__ import annotations

import math
from dataclasses import dataclass

from cachelab.errors import UsageError

__all__ = ["READERS", "CaptureSpec"]

#: The stream readers: the Rust one (``cachelab._core.CaptureReader``, the default) and
#: the Python one it matches (:mod:`cachelab.traces.capture_lines`).
READERS = ("rust", "python")


@dataclass(frozen=True)
class CaptureSpec:
    """What to capture and when to stop: ``server``, or a pool's ``servers`` (each member
    watched at once, merged by time)."""

    server: str = ""
    #: Seconds to capture.
    duration: float = 60.0
    #: Stop after this many accesses written.
    max_events: int = 50_000_000
    #: Stop after this many bytes of the server's stream.
    max_bytes: int = 8 * 2**30
    #: The share of keys kept (all accesses of a key or none), in (0, 1].
    sample: float = 1.0
    #: Write the keys as they are rather than pseudonymised.
    keep_keys: bool = False
    connect_timeout: float = 2.0
    #: A pool's members (HOST:PORT or unix:PATH each), instead of ``server``.
    servers: tuple[str, ...] = ()
    #: The stream reader: ``rust`` or ``python`` (:data:`READERS`).
    reader: str = "rust"

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
        if not (math.isfinite(self.duration) and 0 < self.duration <= 7 * 86_400):
            raise UsageError(f"duration must be above 0 and at most a week, not {self.duration}")
        if not 0 < self.sample <= 1:
            raise UsageError(f"sample must be in (0, 1], not {self.sample}")
        if self.max_events < 1 or self.max_bytes < 1:
            raise UsageError("max_events and max_bytes must be at least 1")
        if not 0 < self.connect_timeout <= 60:
            raise UsageError(f"connect_timeout must be in (0, 60] s, not {self.connect_timeout}")
        for server in self.members:
            if server.startswith("unix:"):
                continue
            host, sep, port = server.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise UsageError(f"server {server!r} is not HOST:PORT or unix:PATH")
