"""Test certificates made with the openssl command: a CA (``ca``) and a server certificate it
signs (``leaf``), EC P-256, valid for 2 days. The TLS tests (tests/tls) and the Redis tier's
``rediss://`` test make theirs with these."""

from __future__ import annotations

import subprocess
from pathlib import Path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=30)


def ca(d: Path, name: str) -> tuple[Path, Path]:
    """A self-signed CA in ``d``: its certificate and key."""
    cert, key = d / f"{name}.pem", d / f"{name}.key"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign")
    return cert, key


def leaf(d: Path, name: str, signer: tuple[Path, Path], san: str) -> tuple[Path, Path]:
    """A server certificate in ``d`` for ``san`` (``IP:127.0.0.1,DNS:localhost``), signed by
    ``signer`` (a :func:`ca`): its certificate and key."""
    cert, key, csr, ext = (d / f"{name}.pem", d / f"{name}.key", d / f"{name}.csr",
                           d / f"{name}.ext")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}")
    ext.write_text(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n"
                   "extendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(signer[0]), "-CAkey", str(signer[1]),
             "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext))
    return cert, key
