"""The exceptions cachelab raises, as one hierarchy.

    CachelabError
    ├── UsageError               bad option or input (CLI exit code 2)
    │   ├── InvalidKey           a key memcached would refuse or that could inject a command
    │   └── InputError           a malformed file: names the file and line
    ├── ServerError              the server misbehaved or went away (CLI exit code 3)
    │   ├── MemcachedNotInstalled
    │   ├── TwemproxyNotInstalled    no nutcracker binary (for a private twemproxy)
    │   ├── ServerUnreachable    could not connect
    │   │   └── TlsHandshakeFailed   connected, but the TLS handshake failed (certificate, no TLS)
    │   ├── ServerTimeout        no reply within the deadline
    │   ├── ConnectionClosed     the server closed or reset the connection
    │   ├── ProtocolError        bytes that are not a valid reply
    │   ├── ServerReplyError     ERROR / CLIENT_ERROR / SERVER_ERROR from the server
    │   ├── AgentsLost           load agents on a Ray cluster lost or silent (a network failure)
    │   └── RayConnectionLost    the connection to the Ray cluster broke mid-run (Ray Client)
    └── Interrupted              stopped by Ctrl-C or SIGTERM (partial results were kept)

The Rust core raises these classes directly, so ``except cachelab.errors.ServerTimeout`` works
the same for library and CLI code.
"""

from __future__ import annotations

from typing import Any


class CachelabError(Exception):
    """Base class of every error cachelab raises on purpose."""

    exit_code = 1


class UsageError(CachelabError, ValueError):
    """A bad option, argument or input."""

    exit_code = 2


class InvalidKey(UsageError):
    """A key that is empty, longer than 250 bytes, or holds whitespace or control bytes."""


class InputError(UsageError):
    """A malformed input file; the message names the file and line."""


class ServerError(CachelabError):
    """The server could not be reached, or failed while we talked to it."""

    exit_code = 3


class MemcachedNotInstalled(ServerError):
    """No memcached binary was found for a private server."""


class TwemproxyNotInstalled(ServerError):
    """No nutcracker (twemproxy) binary was found for a private proxy."""


class ServerUnreachable(ServerError, ConnectionError):
    """Connecting failed or timed out."""


class TlsHandshakeFailed(ServerUnreachable):
    """Connected, but the TLS handshake failed: a certificate that does not verify, a server
    that does not speak TLS, or no answer within the connect timeout. The message names the
    address."""


class ServerTimeout(ServerError, TimeoutError):
    """A request got no reply within its deadline."""


class ConnectionClosed(ServerError, ConnectionError):
    """The server closed or reset the connection."""


class ProtocolError(ServerError):
    """The server sent bytes that are not a valid reply."""


class ServerReplyError(ServerError):
    """The server answered ERROR, CLIENT_ERROR or SERVER_ERROR."""


class AgentsLost(ServerError):
    """The load agents on a Ray cluster did not answer in time, or every one was lost: a
    cluster or network failure (exit 3), whatever the memcached servers did."""


class RayConnectionLost(ServerError, ConnectionError):
    """The connection to the Ray cluster broke during a run (Ray Client's data channel closed:
    the head, its client server or the network went away); the message names the address and
    what to try."""


class Interrupted(CachelabError):
    """The run was stopped by a signal; ``partial`` is the result it kept (what it measured
    before the signal), or None when it kept nothing."""

    exit_code = 130

    def __init__(self, message: str, partial: Any = None) -> None:
        super().__init__(message)
        self.partial = partial
