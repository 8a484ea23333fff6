"""Private memcached servers on a free loopback address, always cleaned up.

Tests use them, and so does every CLI verb that is not given a server to talk to::

    with PrivateMemcached(memory_mb=64, threads=4) as mc:
        print(mc.address)        # "127.0.0.1:40123"

A private server never outlives its owner:

* ``stop()``, or leaving the ``with`` block, ends it (SIGTERM, then SIGKILL after 2 s);
* an ``atexit`` hook (``stop_all``) stops every server still running when Python exits;
* on Linux the kernel sends it SIGTERM if our process dies without running any Python cleanup
  (SIGKILL, crash), through ``prctl(PR_SET_PDEATHSIG)``.  Linux ties that signal to the *thread*
  that started the server, so start private servers from a thread that lives as long as they
  should (normally the main thread).

The server runs in a session of its own, so a Ctrl-C typed in the terminal reaches only us and
we stop the server in order.  A server whose own flags make it listen over TLS (``-Z``) is
probed through the Rust client with the run's :class:`~cachelab.tls.TlsOptions`; otherwise
this module uses the standard library only.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import cachelab._core as _core
from cachelab.childproc import LOOPBACK, ChildProcess, ExitRegistry, free_port
from cachelab.errors import (
    MemcachedNotInstalled,
    ServerError,
    ServerUnreachable,
    TlsHandshakeFailed,
    UsageError,
)
from cachelab.tls import TlsOptions, core_tls
from cachelab.units import limited, limits_of

__all__ = ["LOOPBACK", "SERVER_LIMITS", "STATS_TIMEOUT", "PrivateMemcached", "PrivateRedis",
           "PrivateRedisCluster", "ServerOptions", "Target", "find_memcached",
           "on_this_machine", "proxy_message", "read_stats", "restarted", "serve",
           "started_unix", "stats_or_none", "stop_all"]

_INSTALL_HINT = "memcached is not installed; install it with: apt-get install -y memcached"
_PROBE_TIMEOUT = 0.25  # seconds per socket operation while waiting for the server
# Seconds for a TLS probe's connect and handshake: a refused connect returns at once, so only
# a listener that takes the connection and never answers the handshake waits this long.
_TLS_PROBE_TIMEOUT = 2.0
#: Worker threads (``-t``) of a private memcached unless the options or the verb say.
DEFAULT_THREADS = 4
#: Seconds a ``stats`` read waits to connect and for its reply, unless its caller says.
STATS_TIMEOUT = 2.0


@dataclass(frozen=True)
class ServerOptions:
    """The private memcached a verb starts when it is given no server (the CLI's
    ``--server-threads``, ``--server-memory`` and ``--server-args``). A verb may raise the
    memory to what its data needs; see :func:`serve`."""

    memory_mb: int = limited(64, 1, 2**20, unit="MB")
    #: Worker threads (``-t``); None: the verb's default (:data:`DEFAULT_THREADS`, or what
    #: the verb asks :func:`serve` for, as replay does).
    threads: int | None = limited(None, 1, 1024)
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.memory_mb < 1 or (self.threads is not None and self.threads < 1):
            raise UsageError("--server-threads and --server-memory must be at least 1")


#: The range of each of :class:`ServerOptions`' numbers (``--server-memory``,
#: ``--server-threads``).
SERVER_LIMITS = limits_of(ServerOptions)


@dataclass
class Target:
    """The server a verb talks to: its address, its pid when it is ours (so its scheduler
    statistics can be read), and the facts recorded with the result."""

    address: str
    pid: int | None = None
    facts: dict[str, object] = field(default_factory=lambda: {"private": False})
    #: The private server itself (None for a server we were given).
    private: PrivateMemcached | None = None


@contextlib.contextmanager
def serve(
    server: str | None,
    options: ServerOptions | None = None,
    *,
    memory_mb: int = 0,
    threads: int | None = None,
    default_threads: int = DEFAULT_THREADS,
    item_size_max: str | None = None,
    cpus: str | None = None,
) -> Iterator[Target]:
    """The one place a verb gets its server: ``server`` itself (``host:port`` or
    ``unix:/path``), or, when it is None, a private memcached started from ``options`` with
    at least ``memory_mb`` of memory (and ``threads``, ``item_size_max`` when the verb sets
    them; ``default_threads`` when neither the verb nor the options say; pinned to ``cpus``,
    ``taskset -c`` style, when given), stopped when the block ends — also on an error or
    Ctrl-C. A server given is never pinned."""
    if server is not None:
        yield Target(address=server)
        return
    opts = options or ServerOptions()
    workers = threads if threads is not None else (
        opts.threads if opts.threads is not None else default_threads)
    mc = PrivateMemcached(memory_mb=max(opts.memory_mb, memory_mb), threads=workers,
                          item_size_max=item_size_max, extra_args=opts.extra_args, cpus=cpus)
    with mc:
        yield Target(address=mc.address, pid=mc.pid, facts={"private": True, "argv": mc.argv},
                     private=mc)


@contextlib.contextmanager
def private_pool(n: int, options: ServerOptions | None = None, *,
                 memory_mb: int = 0) -> Iterator[list[PrivateMemcached]]:
    """``n`` private memcached servers on free loopback ports (a pool the run owns: the only
    servers a failure drill may stop, kill or restart), each with at least ``memory_mb`` of
    memory, stopped when the block ends — also on an error or Ctrl-C."""
    opts = options or ServerOptions()
    threads = opts.threads if opts.threads is not None else 1
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(PrivateMemcached(
            memory_mb=max(opts.memory_mb, memory_mb), threads=threads,
            extra_args=opts.extra_args)) for _ in range(n)]


@contextlib.contextmanager
def private_redis_pool(n: int, options: ServerOptions | None = None, *,
                       memory_mb: int = 0) -> Iterator[list[PrivateRedis]]:
    """:func:`private_pool` of ``n`` private redis-servers (``load --protocol resp
    --private-pool N``): each with ``maxmemory`` at least ``memory_mb`` (``allkeys-lru``
    past it, as a private memcached evicts) and ``options.extra_args``, stopped when the
    block ends."""
    opts = options or ServerOptions()
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(PrivateRedis(
            memory_mb=max(opts.memory_mb, memory_mb), extra_args=opts.extra_args))
            for _ in range(n)]


def find_memcached(binary: str | None = None) -> str:
    """Return the path of the memcached binary.

    Looks at ``binary``, then the ``CACHELAB_MEMCACHED`` environment variable, then ``PATH``.
    Raises MemcachedNotInstalled if the chosen name is not an executable.
    """
    name = binary or os.environ.get("CACHELAB_MEMCACHED") or "memcached"
    path = shutil.which(name)
    if path is None:
        raise MemcachedNotInstalled(_INSTALL_HINT)
    return path


class _RestartsOnItsPort(ChildProcess):
    """A private server the failure drills SIGKILL and start again, empty, on the same TCP
    port (``fixed_port``: the port of the next start, else a free one). Only ever this
    object's own process."""

    fixed_port: int | None
    _port: int | None

    def kill(self) -> None:
        """SIGKILL the server (a failure drill): it stops at once, its data gone; the port
        stays ours for :meth:`restart`."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def _cannot_restart(self) -> str | None:
        """Why :meth:`restart` is refused, or None."""
        return None if self._port is not None else "the server has not been started"

    def restart(self) -> Self:
        """Start the server again on the same TCP port (after :meth:`kill`, or a stop), empty,
        and wait until it answers."""
        why = self._cannot_restart()
        if why is not None:
            raise UsageError(why)
        port = self._port
        self.stop()
        self.fixed_port = port
        return self.start()

    def _retry(self, failure: str) -> bool:
        """A port taken under us is tried again, unless the port was given (or is the one
        to restart on)."""
        return super()._retry(failure) and self.fixed_port is None


class PrivateMemcached(_RestartsOnItsPort):
    """A memcached started by us on a free loopback TCP port or a private Unix socket.

    ``start()`` returns once the server answers ``version``; ``stop()`` ends it.  Use it as a
    context manager to do both.  Stopped servers may be started again (on a new address).
    Starting, waiting and stopping are :class:`~cachelab.childproc.ChildProcess`'s.
    """

    program = label = "memcached"

    def __init__(
        self,
        *,
        memory_mb: int = 64,
        threads: int = 4,
        item_size_max: str | None = None,
        extra_args: Sequence[str] = (),
        unix_socket: bool = False,
        cpus: str | None = None,
        binary: str | None = None,
        wrapper: Sequence[str] = (),
        start_timeout: float = 5.0,
        tls_files: tuple[str, str] | None = None,
        tls: TlsOptions | None = None,
        host: str = LOOPBACK,
        port: int | None = None,
    ) -> None:
        """Describe the server; nothing runs until ``start()``.

        memory_mb: cache size (``-m``).  threads: worker threads (``-t``).
        item_size_max: largest item, e.g. ``"2m"`` (``-I``).  extra_args: appended verbatim.
        unix_socket: listen on a socket file in a fresh temporary directory instead of TCP.
        cpus: pin the server with ``taskset -c CPUS``, e.g. ``"0-1"``.
        binary: memcached to run (see ``find_memcached``).
        wrapper: a command memcached runs under, e.g. ``["chrt", "-f", "50"]``.
        start_timeout: seconds ``start()`` may take in all.
        tls_files: ``(certificate chain, key)`` PEM files: the server also listens for TLS
        (``-Z``) on a second port, :attr:`tls_address`; :attr:`address` stays plain TCP
        (``-l notls:``), so the server is probed and stopped as usual.
        tls: for a server whose ``extra_args`` (or wrapper) make its one listener speak TLS
        (``-Z`` and its certificate): ``start()`` waits for it to answer over TLS with these
        options, and a listener that does not complete the handshake fails the start at once
        (:class:`~cachelab.errors.TlsHandshakeFailed`) rather than at ``start_timeout``.
        host: the loopback address to listen on (``127.0.0.1`` unless given, or another of
        127.0.0.0/8, e.g. ``127.0.0.2`` for the members of a test pool).
        port: listen on this TCP port (e.g. 11211, whose ketama point names differ) rather
        than a free one; a port taken by another program fails the start, with no retry.
        """
        super().__init__(host=host, start_timeout=start_timeout, binary=binary)
        if (tls_files is not None or tls is not None) and unix_socket:
            raise UsageError("a private memcached with TLS listens on TCP, not a Unix socket")
        if tls_files is not None and tls is not None:
            raise UsageError("give tls_files (a plain and a TLS listener, probed in plain TCP) "
                             "or tls (the server's own flags listen over TLS), not both")
        if memory_mb < 1:
            raise UsageError(f"memory_mb must be at least 1, not {memory_mb}")
        if threads < 1:
            raise UsageError(f"threads must be at least 1, not {threads}")
        if port is not None and (unix_socket or tls_files is not None or not 0 < port < 65536):
            raise UsageError(f"port={port!r}: a TCP port from 1 to 65535, without unix_socket "
                             "or tls_files")
        self.fixed_port = port
        self.memory_mb = memory_mb
        self.threads = threads
        self.item_size_max = item_size_max
        self.extra_args = tuple(extra_args)
        self.unix_socket = unix_socket
        self.cpus = cpus
        self.wrapper = tuple(wrapper)
        self.tls_files = tls_files
        self.tls = tls
        self._tls_port: int | None = None
        self._socket_path: str | None = None
        self._port: int | None = None
        self._version: str | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def _cannot_restart(self) -> str | None:
        if self._port is None or self.unix_socket or self.tls_files is not None:
            return "only a plain TCP private memcached restarts on its port"
        return None

    # -- properties ----------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """``"127.0.0.1:PORT"`` or ``"unix:/path/to.sock"``: the form cachelab's clients take."""
        if self._socket_path is not None:
            return f"unix:{self._socket_path}"
        if self._port is not None:
            return f"{self._host}:{self._port}"
        raise RuntimeError("the server has not been started")

    @property
    def host(self) -> str | None:
        """The loopback address (``"127.0.0.1"`` unless given) over TCP, None over a Unix
        socket."""
        return self._host if self._port is not None else None

    @property
    def port(self) -> int | None:
        """The TCP port, or None over a Unix socket or before ``start()``."""
        return self._port

    @property
    def socket_path(self) -> str | None:
        """The Unix socket file, or None over TCP or before ``start()``."""
        return self._socket_path

    @property
    def tls_address(self) -> str | None:
        """``127.0.0.1:PORT`` of the TLS listener (with ``tls_files``, or :attr:`address` with
        ``tls``), else None."""
        if self.tls is not None and self._port is not None:
            return self.address
        return None if self._tls_port is None else f"{self._host}:{self._tls_port}"

    @property
    def version(self) -> str | None:
        """The server's version, e.g. ``"1.6.18"``, as it answered at start-up."""
        return self._version

    def __repr__(self) -> str:
        where = self.address if self._socket_path or self._port else "not started"
        state = f"pid {self.pid}" if self.running else "stopped"
        return (
            f"<PrivateMemcached {where} {state} memory_mb={self.memory_mb} threads={self.threads}>"
        )

    # -- what ChildProcess asks of us ------------------------------------------------------------

    def _command(self) -> list[str]:
        """``[*wrapper, memcached]``, or ``[*wrapper, taskset, -c, CPUS, memcached]`` when
        pinned."""
        binary = find_memcached(self.binary)
        if self.cpus is None:
            return [*self.wrapper, binary]
        taskset = shutil.which("taskset")
        if taskset is None:
            raise UsageError(
                f"pinning memcached to CPUs {self.cpus} needs taskset; "
                "install it with: apt-get install -y util-linux"
            )
        return [*self.wrapper, taskset, "-c", self.cpus, binary]

    def _launch(self, command: list[str]) -> None:
        """Pick a fresh address and start the process (without waiting for it)."""
        if self.unix_socket:
            self._dir = tempfile.mkdtemp(prefix="cachelab-")
            self._socket_path = os.path.join(self._dir, "memcached.sock")
            listen = ["-s", self._socket_path]
        elif self.tls_files is not None:
            self._port, self._tls_port = free_port(self._host), free_port(self._host)
            cert, key = self.tls_files
            listen = ["-Z", "-o", f"ssl_chain_cert={cert},ssl_key={key}",
                      "-l", f"notls:{self._host}:{self._port}",
                      "-l", f"{self._host}:{self._tls_port}"]
        else:
            self._port = self.fixed_port or free_port(self._host)
            listen = ["-l", self._host, "-p", str(self._port)]
        argv = [*command, *listen, "-U", "0", "-m", str(self.memory_mb), "-t", str(self.threads)]
        if self.item_size_max is not None:
            argv += ["-I", self.item_size_max]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            argv += ["-u", "root"]  # memcached refuses to run as root unless told to
        argv += self.extra_args
        self._version = None
        self._spawn(argv)

    def _ready(self, deadline: float) -> bool:
        version = self._probe(deadline)
        if version is None:
            return False
        self._version = version
        return True

    def _probe(self, deadline: float) -> str | None:
        """The version the server reports, or None if it does not answer (yet) or is not ours.

        Also asks for ``stats`` and checks the pid, in case another program took our port
        between choosing it and memcached's bind. With ``tls``, over TLS (see
        :meth:`_probe_tls`).
        """
        if self.tls is not None:
            return self._probe_tls(self.tls, deadline)
        timeout = max(0.001, min(_PROBE_TIMEOUT, deadline - time.monotonic()))
        try:
            with self._connect(timeout) as sock:
                sock.sendall(b"version\r\nstats\r\n")
                reply = _read_until(sock, b"END\r\n")
        except OSError:
            return None
        lines = reply.decode("ascii", "replace").split("\r\n")
        if not lines[0].startswith("VERSION ") or f"STAT pid {self.pid}" not in lines:
            return None
        return lines[0][len("VERSION ") :]

    def _probe_tls(self, tls: TlsOptions, deadline: float) -> str | None:
        """:meth:`_probe` over TLS, through the Rust client (the same verification as the run
        that follows). Not listening yet, or no reply yet: None. A listener that takes the
        connection but fails the handshake (no ``-Z``, a certificate that does not verify):
        TlsHandshakeFailed, at once — waiting would not change it."""
        timeout = max(0.001, min(_TLS_PROBE_TIMEOUT, deadline - time.monotonic()))
        try:
            with _core.Client(self.address, connect_timeout=timeout, timeout=timeout,
                              tls=tls.to_core()) as client:
                version = client.version()
                pid = client.stats().get("pid")
        except TlsHandshakeFailed:
            raise
        except ServerError:
            return None
        return version if pid == str(self.pid) else None

    def _connect(self, timeout: float) -> socket.socket:
        """A socket connected to the server, with ``timeout`` on every operation."""
        if self._socket_path is None:
            return socket.create_connection((self._host, self._port or 0), timeout=timeout)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(self._socket_path)
        except BaseException:
            sock.close()
            raise
        return sock

    def _nudge(self) -> None:
        """Connect once, so a memcached told to stop exits now rather than up to 1 s later.

        memcached notices SIGTERM only when its main event loop wakes up, which its clock does
        once a second; a new connection wakes it at once.
        """
        with contextlib.suppress(OSError), self._connect(0.1):
            pass


def read_stats(address: str, group: str | None = None, *, timeout: float = STATS_TIMEOUT,
               connect_timeout: float | None = None,
               tls: dict[str, Any] | None = None) -> dict[str, str]:
    """``stats`` (or ``stats <group>``) from the memcached at ``address``, on a connection of
    its own: ``timeout`` for the reply and, unless ``connect_timeout`` is given, for the
    connect; ``tls`` is the Rust client's TLS argument (:meth:`TlsOptions.to_core`).

    The one place cachelab reads a server's statistics. Whatever keeps it from reading them
    (refused, timed out, closed, an ERROR reply to an unknown group) is a
    :class:`~cachelab.errors.ServerError`; :func:`stats_or_none` is for a caller that can do
    without."""
    with _core.Client(address, timeout=timeout,
                      connect_timeout=timeout if connect_timeout is None else connect_timeout,
                      tls=tls) as client:
        return dict(client.stats(group))


def stats_or_none(address: str, group: str | None = None, *, timeout: float = STATS_TIMEOUT,
                  connect_timeout: float | None = None,
                  tls: dict[str, Any] | None = None) -> dict[str, str] | None:
    """:func:`read_stats`, or None when the server cannot be read (a
    :class:`~cachelab.errors.ServerError`)."""
    try:
        return read_stats(address, group, timeout=timeout, connect_timeout=connect_timeout,
                          tls=tls)
    except ServerError:
        return None


#: memcached reports its start this many seconds before it really was (``process_started``
#: in memcached.c, so that its clock is never 0); :func:`started_unix` adds it back.
_START_EARLY_S = 2
#: Seconds two reads of one process's start time may differ (``time`` and ``uptime`` are
#: whole seconds, and the clock may be stepped).
_START_SLACK_S = 2


def started_unix(stats: Mapping[str, str]) -> float | None:
    """When the memcached whose ``stats`` these are started (Unix seconds, to a second or
    two): its ``time`` − ``uptime``; None when either is missing."""
    try:
        return float(int(stats["time"]) - int(stats["uptime"]) + _START_EARLY_S)
    except (KeyError, ValueError):
        return None


def restarted(before: Mapping[str, str], after: Mapping[str, str]) -> bool:
    """Whether two ``stats`` replies from one address come from different processes — a
    server stopped and started again between them: another ``pid``, an ``uptime`` that went
    down, or a start time that moved (a restart in a container keeps its pid). Counters of two
    processes must never be subtracted."""
    if not before or not after:
        return False
    if before.get("pid") and after.get("pid") and before["pid"] != after["pid"]:
        return True
    try:
        if int(after["uptime"]) < int(before["uptime"]):
            return True
    except (KeyError, ValueError):
        pass
    a, b = started_unix(before), started_unix(after)
    return a is not None and b is not None and abs(a - b) > _START_SLACK_S


def proxy_message(address: str, timeout: float = 2.0, tls: TlsOptions | None = None) -> str | None:
    """For a server that closed the connection on ``stats``: the one-line explanation if it
    behaves like a proxy such as twemproxy (on a new connection it answers ``version`` and a
    ``get``), else None. twemproxy 0.5.0 forwards ``version`` and the key commands to its
    members, but closes the connection on ``stats``, meta commands and ``flush_all``."""
    try:
        with _core.Client(address, timeout=timeout, connect_timeout=timeout,
                          tls=core_tls(tls)) as c:
            version = c.version()
            c.get(f"cachelab:probe:{secrets.token_hex(4)}")
    except ServerError:
        return None
    return (f"{address} looks like a proxy such as twemproxy, not a memcached: it answers get "
            f"and version ({version}) but closes the connection on stats, so cachelab cannot "
            "read the memory of the servers behind it; give --server one of them instead")


def on_this_machine(address: str) -> bool:
    """Whether the server at ``address`` (``host:port``, ``[v6]:port`` or ``unix:/path``) runs
    on this machine: a Unix socket, ``localhost``, or a loopback address (127.0.0.0/8, ::1).
    Its CPU is then this machine's (its ``stats`` rusage, its schedstat)."""
    if address.startswith("unix:"):
        return True
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _read_until(sock: socket.socket, terminator: bytes) -> bytes:
    """Receive until the data ends with ``terminator``; ConnectionError on end of stream."""
    data = b""
    while not data.endswith(terminator):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed before the reply ended")
        data += chunk
    return data


class PrivateRedis(_RestartsOnItsPort):
    """A redis-server started by us on a free loopback TCP port (``load --protocol resp``
    without ``--server``): no persistence (``--save ''``, ``--appendonly no``), in a private
    directory, at most ``memory_mb`` of data (``--maxmemory``) evicted by ``allkeys-lru`` past
    it, as a private memcached evicts its oldest items. ``start()`` returns once it answers
    ``PING`` and its ``INFO`` names our process. ``password``: ``--requirepass`` (on the
    command line, where ``ps`` shows it: for tests of a login, not for secrets)."""

    program = "redis-server"
    label = "redis-server"

    def __init__(self, *, memory_mb: int = 64, extra_args: Sequence[str] = (),
                 binary: str | None = None, start_timeout: float = 5.0,
                 wrapper: Sequence[str] = (), password: str | None = None,
                 tls_options: TlsOptions | None = None) -> None:
        super().__init__(start_timeout=start_timeout, binary=binary)
        if memory_mb < 1:
            raise UsageError(f"memory_mb must be at least 1, not {memory_mb}")
        self.memory_mb = memory_mb
        self.extra_args = tuple(extra_args)
        self.password = password
        #: Listen over TLS alone (``--port 0 --tls-port PORT``, ``--tls-auth-clients no``
        #: unless ``extra_args`` say otherwise; the certificate and key are the caller's
        #: ``--tls-cert-file``/``--tls-key-file`` in ``extra_args``), probed over TLS with
        #: these options (``compare --tls`` with redis-server commands). None: plain TCP.
        self.tls_options = tls_options
        #: Programs that exec redis-server (``chrt -f 50``, ``taskset -c 0``), as
        #: PrivateMemcached's: ``compare --server-cmd``.
        self.wrapper = tuple(wrapper)
        self._port: int | None = None
        #: The port of the next start (:meth:`restart`: the same one), else a free one.
        self.fixed_port: int | None = None

    @property
    def address(self) -> str:
        if self._port is None:
            raise RuntimeError("the server has not been started")
        return f"{self._host}:{self._port}"

    def _command(self) -> list[str]:
        found = shutil.which(self.binary or os.environ.get("CACHELAB_REDIS", "redis-server"))
        if found is None:
            raise ServerUnreachable("redis-server is not installed: apt-get install -y "
                                    "redis-server (or give --server redis://HOST:PORT)")
        return [*self.wrapper, found]

    def _launch(self, command: list[str]) -> None:
        self._port = self.fixed_port or free_port(self._host)
        self._dir = tempfile.mkdtemp(prefix="cachelab-redis-")
        listen = ["--port", str(self._port)]
        if self.tls_options is not None:
            listen = ["--port", "0", "--tls-port", str(self._port), "--tls-auth-clients", "no"]
        self._spawn([*command, "--bind", self._host, *listen, "--save", "",
                     "--appendonly", "no", "--dir", self._dir, "--logfile", "",
                     "--maxmemory", f"{self.memory_mb}mb", "--maxmemory-policy", "allkeys-lru",
                     *(("--requirepass", self.password) if self.password else ()),
                     *self.extra_args])

    def _ready(self, deadline: float) -> bool:
        """``PING`` answered and ``INFO server`` naming this process (not another program
        that took the port between our choosing it and redis-server's bind); ``AUTH`` first
        with a password."""
        if self.tls_options is not None:
            return self._ready_tls(self.tls_options, deadline)
        timeout = max(0.001, min(_PROBE_TIMEOUT, deadline - time.monotonic()))
        login = b""
        if self.password:
            pw = self.password.encode()
            login = b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(pw), pw)
        try:
            with socket.create_connection((self._host, self._port or 0), timeout=timeout) as s:
                s.sendall(login + b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
                reply = b""
                while b"\r\nprocess_id:" not in reply or not reply.endswith(b"\r\n\r\n"):
                    chunk = s.recv(65536)
                    if not chunk:
                        return False
                    reply += chunk
        except OSError:
            return False
        if login:
            if not reply.startswith(b"+OK\r\n"):
                return False
            reply = reply[len(b"+OK\r\n"):]
        return reply.startswith(b"+PONG") and f"process_id:{self.pid}\r\n".encode() in reply

    def _ready_tls(self, tls: TlsOptions, deadline: float) -> bool:
        """:meth:`_ready` over TLS, through the Rust client (the verification the run that
        follows uses): ``INFO server`` naming this process. Not listening yet: False. A
        handshake that fails (a certificate that does not verify): TlsHandshakeFailed at
        once, as :meth:`PrivateMemcached._probe_tls` does."""
        timeout = max(0.001, min(_TLS_PROBE_TIMEOUT, deadline - time.monotonic()))
        try:
            with _core.RespClient(self.address, password=self.password,
                                  connect_timeout=timeout, timeout=timeout,
                                  tls=tls.to_core()) as client:
                info = dict(client.info("server"))
        except TlsHandshakeFailed:
            raise
        except ServerError:
            return False
        return info.get("process_id") == str(self.pid)


class _ClusterNode(PrivateRedis):
    """One node of a :class:`PrivateRedisCluster`: cluster mode, its ``nodes.conf`` in its own
    directory, on a port whose cluster bus port (port + 10000) is free too."""

    def _launch(self, command: list[str]) -> None:
        for _ in range(200):
            port = free_port(self._host)
            if port < 55_000:
                with contextlib.suppress(OSError), socket.socket() as s:
                    s.bind((self._host, port + 10_000))
                    break
        self._port = port
        self._dir = tempfile.mkdtemp(prefix="cachelab-redis-cluster-")
        self._spawn([*command, "--bind", self._host, "--port", str(port), "--save", "",
                     "--appendonly", "no", "--dir", self._dir, "--logfile", "",
                     "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                     # The cluster bus connects from this address, so peers can call back.
                     "--bind-source-addr", self._host,
                     "--maxmemory", f"{self.memory_mb}mb", "--maxmemory-policy", "noeviction",
                     *self.extra_args])


class PrivateRedisCluster:
    """A Redis Cluster started by us for tests and trials: ``masters`` OS redis-servers in
    cluster mode, one on each of ``hosts`` (loopback addresses, 127.0.0.31 and on by
    default), no replicas, no persistence, joined by ``redis-cli --cluster create``;
    ``start()`` returns once every node says ``cluster_state:ok``. Stopped by PID (each
    node's), never by name. ``memory_mb``: each node's ``maxmemory`` (``noeviction``)."""

    def __init__(self, masters: int = 3, *, hosts: Sequence[str] | None = None,
                 memory_mb: int = 64, extra_args: Sequence[str] = (),
                 start_timeout: float = 60.0) -> None:
        if masters < 1:
            raise UsageError(f"a cluster needs at least one master, not {masters}")
        hosts = list(hosts or [f"127.0.0.{31 + i}" for i in range(masters)])
        if len(hosts) != masters:
            raise UsageError(f"{masters} masters need {masters} hosts, not {len(hosts)}")
        self.start_timeout = start_timeout
        self.nodes = [_ClusterNode(memory_mb=memory_mb, extra_args=extra_args)
                      for _ in hosts]
        for node, host in zip(self.nodes, hosts):
            ChildProcess.__init__(node, host=host, start_timeout=10.0)

    @property
    def addresses(self) -> list[str]:
        return [n.address for n in self.nodes]

    @property
    def pids(self) -> list[int | None]:
        return [n.pid for n in self.nodes]

    def cli(self, node: int, *args: str, timeout: float = 10.0) -> str:
        """What ``redis-cli -h HOST -p PORT ARGS`` prints for node ``node`` (redirections
        shown, not followed)."""
        host, port = self.nodes[node].address.rsplit(":", 1)
        out = subprocess.run(["redis-cli", "-h", host, "-p", port, *args], check=True,
                             capture_output=True, text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL)
        return out.stdout.strip()

    def start(self) -> PrivateRedisCluster:
        try:
            for n in self.nodes:
                n.start()
            if shutil.which("redis-cli") is None:
                raise ServerUnreachable("redis-cli is not installed (it comes with "
                                        "redis-server: apt-get install -y redis-server)")
            done = subprocess.run(["redis-cli", "--cluster", "create", *self.addresses,
                                   "--cluster-replicas", "0", "--cluster-yes"],
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                  timeout=self.start_timeout)
            if done.returncode != 0:
                raise ServerUnreachable("redis-cli --cluster create failed: "
                                        + (done.stdout + done.stderr).strip()[-400:])
            self.wait_ok(self.start_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ok(self, timeout: float) -> None:
        """Returns once every node says ``cluster_state:ok`` (after a start, or after a node
        was stopped long enough for the others to mark it failed: the cluster refuses every
        command with ``CLUSTERDOWN`` until it has rejoined); ServerUnreachable past
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        for i in range(len(self.nodes)):
            while "cluster_state:ok" not in self.cli(i, "CLUSTER", "INFO"):
                if time.monotonic() > deadline:
                    raise ServerUnreachable(f"cluster node {self.nodes[i].address}: not "
                                            f"cluster_state:ok within {timeout:g} s")
                time.sleep(0.05)

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()

    def __enter__(self) -> PrivateRedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- the registry of running servers, stopped at exit -----------------------------------------

_registry = ExitRegistry()
PrivateMemcached.registry = _registry
PrivateRedis.registry = _registry


def stop_all() -> None:
    """Stop every private server this process started and has not stopped yet."""
    _registry.stop_all()
