"""Ray, the optional cluster runtime: connecting to a cluster, placing one worker per node,
and estimating a worker's clock offset. docs/scale-out.md has the whole story.

Ray is an optional extra (``pip install 'cachelab[ray]'``): nothing here imports it at module
level, so ``import cachelab`` works without it, and :func:`require_ray` turns its absence into
a :class:`~cachelab.errors.UsageError` (CLI exit code 2) that says how to get it.

The verbs that fan out (``load --ray``, ``scale --ray``, ``simulate --ray``) take a
:class:`RayOptions` and run inside :func:`connected`; they define their own actors and tasks.
Connecting is bounded: :func:`connected` first tries a plain TCP connection to the address,
then runs ``ray.init`` in a thread of its own and waits for it at most
``RayOptions.connect_timeout`` seconds (Ray itself retries an absent cluster for minutes, in C++
code that Ctrl-C does not reach), so a cluster that does not answer is a
:class:`~cachelab.errors.ServerUnreachable` naming the address, and Ctrl-C ends the wait.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from cachelab.errors import CachelabError, RayConnectionLost, ServerUnreachable, UsageError
from cachelab.units import check_limit, limited, limits_of

__all__ = ["CONNECT_TIMEOUT", "INSTALL_HINT", "PLACEMENTS", "RAY_LIMITS", "ClockOffset",
           "RayOptions", "clock_offset", "connected", "connection_errors", "node_count",
           "placement_group", "require_ray"]

#: What to run to get Ray; said by every error about its absence.
INSTALL_HINT = "pip install 'cachelab[ray]'"

#: ``spread``: one worker per node (a STRICT_SPREAD placement group: a run needs as many
#: nodes as agents); ``pack``: as few nodes as fit (several agents may share one).
PLACEMENTS = ("spread", "pack")

#: Seconds :func:`connected` waits for a cluster to answer, by default (``--ray-timeout``).
CONNECT_TIMEOUT = 30.0

#: What a connection failure suggests.
_START_HINT = "is `ray start --head` running there?"


@dataclass
class RayOptions:
    """Where and how to fan out. ``address`` None means ``auto``: the ``RAY_ADDRESS``
    environment variable, else the cluster ``ray start`` left on this machine."""

    address: str | None = None
    #: Load agents (``load --ray``); ignored by ``simulate --ray``.
    agents: int = limited(1, 1, 1024)
    placement: str = "spread"
    #: This machine's address as the cluster should see it (Ray's ``_node_ip_address``):
    #: needed when the nodes listen on an address other than the machine's main one.
    node_ip: str | None = None
    #: Seconds to wait for the cluster to place every worker before giving up.
    ready_timeout: float = 60.0
    #: Seconds to wait for the cluster to answer when connecting (``--ray-timeout``).
    connect_timeout: float = limited(CONNECT_TIMEOUT, 0.0, 3600.0, above=True, unit="seconds")

    @property
    def cluster(self) -> str:
        """The cluster these options name: the address, else ``$RAY_ADDRESS``, else
        ``auto``."""
        return self.address or os.environ.get("RAY_ADDRESS") or "auto"

    def check(self) -> None:
        """Raises UsageError naming the first bad field."""
        for name, limit in RAY_LIMITS.items():
            check_limit(name, limit, getattr(self, name))
        if self.placement not in PLACEMENTS:
            raise UsageError(f"placement must be {' or '.join(PLACEMENTS)}, "
                             f"not {self.placement!r}")
        if not self.ready_timeout > 0:
            raise UsageError("ready timeout must be above 0 seconds")
        if self.address is not None:
            _endpoint(self.address)


#: The range of each numeric field of :class:`RayOptions` (``--agents`` and ``--ray-timeout``
#: read them).
RAY_LIMITS = limits_of(RayOptions)


def require_ray() -> ModuleType:
    """The ``ray`` module, or UsageError saying how to install it."""
    try:
        # deferred: optional dependency (the [ray] extra), 0.5 s to import
        import ray
    except ImportError:
        raise UsageError(f"--ray needs Ray, an optional extra: {INSTALL_HINT}") from None
    return ray


@contextlib.contextmanager
def connected(options: RayOptions) -> Iterator[ModuleType]:
    """Ray, connected to the cluster of ``options`` for the block (a connection the caller
    already made is used as it is and left open).

    A cluster that does not answer within ``options.connect_timeout`` seconds raises
    :class:`~cachelab.errors.ServerUnreachable` naming the address; Ctrl-C while connecting
    raises KeyboardInterrupt at once (the abandoned ``ray.init`` is left to a daemon thread,
    which disconnects if it ever connects). Ray's own retry messages are kept off stderr while
    it connects."""
    ray = require_ray()
    options.check()
    address = options.cluster
    if ray.is_initialized():
        with connection_errors(address):
            yield ray
        return
    deadline = time.monotonic() + options.connect_timeout
    endpoint = _endpoint(address)
    if endpoint is not None:
        _probe(address, endpoint, options.connect_timeout)
    kwargs: dict[str, Any] = {"address": address, "log_to_driver": False,
                              "logging_level": "WARNING", "configure_logging": False}
    if address.startswith("ray://"):
        # gRPC, Ray Client's transport, read when it starts (the user's own settings win):
        # no INFO lines on stderr, and no fork handlers, which run in a child forked while
        # its threads run (a private memcached) and can crash it before it execs.
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
        os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
    elif options.node_ip:
        # (A Ray Client's driver is the client server, on the head: it has its own address.)
        kwargs["_node_ip_address"] = options.node_ip
    _init(ray, address, kwargs, deadline, options.connect_timeout)
    _keep_sigterm_handler()
    try:
        with connection_errors(address):
            yield ray
    finally:
        with contextlib.suppress(ConnectionError):  # the connection is gone: nothing to close
            ray.shutdown()


@contextlib.contextmanager
def connection_errors(address: str) -> Iterator[None]:
    """Ray's errors that say the connection to the cluster at ``address`` broke, raised as
    :class:`~cachelab.errors.RayConnectionLost` (exit 3, one line naming the address and
    what to try) rather than a traceback: Ray Client's ``ConnectionError`` (after its data
    channel's "Unrecoverable error in data channel.": "Failed during this or a previous
    request…", "Request cannot be fulfilled because the data client has disconnected.",
    "Client is shutting down.") and a gRPC error that escapes it. cachelab's own errors (a
    ServerUnreachable is a ConnectionError too) and the OS's socket errors pass unchanged."""
    try:
        yield
    except CachelabError:
        raise
    except Exception as e:
        client = type(e) is ConnectionError or type(e).__module__.split(".")[0] == "grpc"
        if not client:
            raise
        where = "on this machine" if address == "auto" else f"at {address}"
        hint = ("; if Ray Client keeps dropping under load, connect by the head's GCS "
                "address, --ray HEAD:6379, from a machine in the cluster's network"
                if address.startswith("ray://") else "")
        raise RayConnectionLost(f"lost the connection to the Ray cluster {where}: "
                                f"{_broken(e)} (is the cluster still up and reachable? run "
                                f"again{hint})") from None


def _broken(error: BaseException) -> str:
    """What broke Ray Client's connection, short: the gRPC status and details it quotes
    (``UNAVAILABLE: Socket closed``), else the error's text in one line."""
    text = " ".join(str(error).split())
    status = re.search(r"status = StatusCode\.(\w+)", text)
    details = re.search(r'details = "([^"]*)"', text)
    if status:
        return status.group(1) + (f": {details.group(1)}" if details else "")
    return text[:200] or type(error).__name__


def _endpoint(address: str) -> tuple[str, int] | None:
    """The host and port to try for ``address`` (``HOST:PORT`` or ``ray://HOST:PORT``); None
    for the addresses Ray resolves itself (``auto``, ``local``, other schemes). UsageError
    for an address that is neither."""
    if address in ("auto", "local"):
        return None
    rest = address[len("ray://"):] if address.startswith("ray://") else address
    if "://" in rest:
        return None
    host, sep, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--ray {address}: give HOST:PORT (the head's GCS port, e.g. "
                         f"HEAD:6379) or ray://HOST:PORT (Ray Client, e.g. ray://HEAD:10001)")
    return host, int(port)


def _probe(address: str, endpoint: tuple[str, int], timeout: float) -> None:
    """A plain TCP connection to ``endpoint`` within ``timeout`` seconds, closed at once:
    ServerUnreachable naming ``address`` when nothing listens there (``ray.init`` would retry
    it for minutes)."""
    try:
        socket.create_connection(endpoint, timeout=timeout).close()
    except socket.gaierror as e:
        raise ServerUnreachable(f"no Ray cluster answered at {address}: cannot resolve "
                                f"{endpoint[0]} ({e.strerror})") from None
    except socket.timeout:
        raise ServerUnreachable(f"no Ray cluster answered at {address} within {timeout:g} s "
                                f"({_START_HINT})") from None
    except OSError as e:
        why = "connection refused" if isinstance(e, ConnectionRefusedError) else \
            (e.strerror or str(e)).lower()
        raise ServerUnreachable(f"no Ray cluster answered at {address}: {why} "
                                f"({_START_HINT})") from None


def _init(ray: ModuleType, address: str, kwargs: dict[str, Any], deadline: float,
          timeout: float) -> None:
    """``ray.init(**kwargs)`` in a daemon thread, waited for until ``deadline`` (monotonic)
    in short steps, so that Ctrl-C is seen between them; its errors as cachelab's."""
    outcome: list[BaseException | None] = []
    lock = threading.Lock()  # orders the thread's outcome against the caller giving up

    def connect() -> None:
        try:
            ray.init(**kwargs)
        except BaseException as e:  # handed to the waiting thread
            error: BaseException | None = e
        else:
            error = None
        with lock:
            outcome.append(error)
            if error is None and abandoned:
                ray.shutdown()  # connected after the caller gave up: leave nothing open

    abandoned = False
    thread = threading.Thread(target=connect, name="cachelab-ray-connect", daemon=True)
    with _quiet_stderr():
        thread.start()
        try:
            while not outcome and time.monotonic() < deadline:
                thread.join(min(0.2, max(0.0, deadline - time.monotonic())))
        finally:
            with lock:
                abandoned = not outcome
    where, hint = (f"at {address}", _START_HINT) if address != "auto" else \
        ("on this machine", "--ray without ADDRESS and $RAY_ADDRESS unset: start one with "
         "`ray start --head`, or give --ray ADDRESS")
    if not outcome:
        raise ServerUnreachable(f"no Ray cluster answered {where} within {timeout:g} s ({hint})")
    error = outcome[0]
    if error is None:
        return
    first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
    if address.startswith("ray://") and (isinstance(error, ImportError) or
                                         "ray[client]" in first):
        # Ray Client is Ray's [client] extra (grpcio), which cachelab's [ray] extra asks for.
        raise UsageError(f"--ray {address} needs Ray Client, Ray's [client] extra: "
                         f"{INSTALL_HINT}") from None
    if isinstance(error, (ConnectionError, TimeoutError)):
        if address == "auto":  # Ray's "Could not find any running Ray instance. Please …"
            raise ServerUnreachable(f"no Ray cluster found {where} ({hint})") from None
        raise ServerUnreachable(f"no Ray cluster answered {where}: {first} ({hint})") from None
    if isinstance(error, (RuntimeError, ValueError)):
        raise UsageError(f"could not connect to the Ray cluster {where}: {first}") from None
    raise error


def _keep_sigterm_handler() -> None:
    """Puts this process's SIGTERM handler back after Ray connected: Ray's core worker installs
    its own for the signal (a stack trace, then abort: exit -6 and nothing saved), over the
    Python one (cachelab's turns SIGTERM into KeyboardInterrupt, so a run keeps its partial
    results)."""
    if threading.current_thread() is not threading.main_thread():
        return
    handler = signal.getsignal(signal.SIGTERM)
    if handler is not None:  # None: not installed from Python; nothing to put back
        signal.signal(signal.SIGTERM, handler)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 into a scratch file for the block: Ray's C++ core logs its connection
    retries there, straight to the descriptor, and a Ray Client its Python warnings."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        with tempfile.TemporaryFile() as scratch:
            os.dup2(scratch.fileno(), 2)
            try:
                yield
            finally:
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def node_count(ray: ModuleType) -> int:
    """Nodes alive in the cluster."""
    return sum(1 for n in ray.nodes() if n.get("Alive"))


def placement_group(ray: ModuleType, bundles: int, cpus: float, placement: str,
                    timeout: float) -> Any:
    """A ready placement group of ``bundles`` bundles of ``cpus`` CPUs each, one per node
    (``spread``) or packed (``pack``); UsageError when the cluster cannot place it within
    ``timeout`` seconds (too few nodes, or too few free CPUs)."""
    # deferred: optional dependency (the [ray] extra)
    from ray.util.placement_group import placement_group as make
    from ray.util.placement_group import remove_placement_group

    nodes = node_count(ray)
    if placement == "spread" and bundles > nodes:
        raise UsageError(f"{bundles} agents, one per node, need {bundles} nodes; the cluster "
                         f"has {nodes} (add nodes, or use --agent-placement pack)")
    strategy = "STRICT_SPREAD" if placement == "spread" else "PACK"
    group = make([{"CPU": cpus}] * bundles, strategy=strategy)
    ready, _ = ray.wait([group.ready()], timeout=timeout)
    if not ready:
        remove_placement_group(group)
        raise UsageError(
            f"the Ray cluster could not place {bundles} agent(s) of {cpus:g} CPU(s) "
            f"({placement}) within {timeout:g} s: {nodes} node(s), "
            f"{ray.available_resources().get('CPU', 0):g} CPU(s) free")
    return group


@dataclass
class ClockOffset:
    """A remote clock against ours: ``offset_s`` = remote − local (Unix time), within
    ± ``rtt_s`` / 2, from the round trip with the shortest ``rtt_s`` of ``rounds``."""

    offset_s: float
    rtt_s: float
    rounds: int

    def to_dict(self) -> dict[str, Any]:
        return {"offset_ms": round(self.offset_s * 1e3, 3),
                "uncertainty_ms": round(self.rtt_s * 1e3 / 2, 3),
                "rtt_ms": round(self.rtt_s * 1e3, 3), "rounds": self.rounds}


def clock_offset(remote_now: Callable[[], float], rounds: int = 7) -> ClockOffset:
    """Estimates a remote clock's offset NTP-style: each round reads our clock, the remote
    one (``remote_now()``, a blocking call) and ours again; the remote reading is taken to be
    at the midpoint, and the round with the shortest round trip wins."""
    best: tuple[float, float] | None = None
    for _ in range(max(1, rounds)):
        t0 = time.time()
        remote = remote_now()
        t1 = time.time()
        rtt = t1 - t0
        if best is None or rtt < best[1]:
            best = (remote - (t0 + t1) / 2, rtt)
    assert best is not None
    return ClockOffset(offset_s=best[0], rtt_s=best[1], rounds=max(1, rounds))
