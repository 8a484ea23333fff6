"""TLS to a memcached started with ``-Z``: :class:`TlsOptions`, the settings a run connects
with (memtier_benchmark's ``--tls``, ``--cacert``, ``--cert``, ``--key``, ``--tls-skip-verify``
and ``--sni``), checked before anything connects.

The Rust core does the TLS (rustls). Trust: the CA certificates of ``cacert`` when given,
otherwise the Mozilla root set built into cachelab — not the operating system's store, so a
run verifies the same way everywhere. For a private CA, give ``cacert``.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from cachelab.errors import UsageError

__all__ = ["describe_tls", "TlsOptions", "core_tls", "transport_of"]


@dataclass(frozen=True)
class TlsOptions:
    """How a TLS connection is made. Paths are PEM files."""

    #: The certificate authorities to trust (default: the Mozilla roots).
    cacert: str | None = None
    #: A client certificate chain and its key, for a server that asks for one
    #: (memcached ``-o ssl_verify_mode=2``).
    cert: str | None = None
    key: str | None = None
    #: Accept any server certificate: encrypts, but no longer knows who the server is.
    skip_verify: bool = False
    #: The server name sent (SNI) and verified; default: the host of the address.
    sni: str | None = None

    def check(self) -> None:
        """UsageError (one line naming the flag) for a file that is missing or unreadable,
        or a certificate without its key."""
        if (self.cert is None) != (self.key is None):
            raise UsageError("--cert and --key go together: a client certificate needs its key")
        for flag, path in (("--cacert", self.cacert), ("--cert", self.cert),
                           ("--key", self.key)):
            if path is None:
                continue
            if not os.path.isfile(path):
                raise UsageError(f"{flag} {path}: no such file")
            if not os.access(path, os.R_OK):
                raise UsageError(f"{flag} {path}: not readable")
        if self.sni is not None and (not self.sni or any(c.isspace() for c in self.sni)):
            raise UsageError(f"--sni {self.sni!r} is not a server name")

    def to_core(self) -> dict[str, Any]:
        """The dict the Rust core takes (``tls=`` of ``_core.Client``, ``"tls"`` of a spec)."""
        return asdict(self)

    def describe(self) -> dict[str, Any]:
        """What a result records: how the server was verified (no key material, no paths)."""
        return {
            "verify": "none (--tls-skip-verify)" if self.skip_verify
            else ("cacert" if self.cacert else "mozilla-roots"),
            "sni": self.sni,
            "client_certificate": self.cert is not None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TlsOptions:
        """From a TOML table or JSON object with this class's fields (``-`` or ``_``)."""
        known = set(cls.__dataclass_fields__)
        values = {k.replace("-", "_"): v for k, v in d.items()}
        unknown = sorted(set(values) - known)
        if unknown:
            raise UsageError(f"tls: unknown setting {unknown[0]!r}; known: "
                             f"{', '.join(sorted(known))}")
        return cls(**values)


def core_tls(tls: TlsOptions | None) -> dict[str, Any] | None:
    """``tls.to_core()``, or None for plain TCP."""
    return None if tls is None else tls.to_core()


def describe_tls(tls: TlsOptions | None) -> dict[str, Any] | None:
    """``tls.describe()`` (what results record: no paths, no keys), or None for plain TCP."""
    return None if tls is None else tls.describe()


def transport_of(address: str, tls: TlsOptions | None) -> str:
    """``tcp``, ``tls`` or ``unix``: what a run over ``address`` uses, as results record it."""
    if address.startswith(("unix:", "/")):
        return "unix"
    return "tls" if tls is not None else "tcp"
