"""Shared fixtures: private memcached (and Redis, PostgreSQL) servers and fake misbehaving
servers."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Tests normally run against the installed package (with its compiled extension); fall back to
# the source tree only when cachelab is not installed at all, so an install is never shadowed.
if importlib.util.find_spec("cachelab") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

import signal  # noqa: E402

# A shell that starts a command in the background (`make test &`, CI wrappers without job
# control) starts it with SIGINT ignored, and an ignored signal stays ignored across exec: the
# CLI processes the tests interrupt with SIGINT would never see it. Tests interrupt what they
# start: give this process (each xdist worker too) Python's own handler, so their children
# start with the default disposition.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from cachelab.servers import PrivateMemcached  # noqa: E402
from clitools import InProcess  # noqa: E402
from fakes import FakeServer  # noqa: E402
from privatepg import PrivatePostgres  # noqa: E402
from privateredis import PrivateRedis, PrivateRedisCluster, secret  # noqa: E402

#: Session fixtures too costly to start once in every pytest-xdist worker (``make test`` runs the
#: suite in several): the tests that use one are sent to one worker (``--dist loadgroup``).
SHARED_FIXTURES = {"postgresql_dsn": "postgres", "results": "report", "more": "report",
                   "swept": "report"}
#: Module-scoped fixtures that measure or simulate for seconds (test_damaged_results' saved
#: results, test_profiles_model's measured profile, test_load_merge's runs, the replay and
#: calibration results), that start several servers (a Redis ``pair``, a 3-master
#: ``cluster``), or that need fixed ports (test_twemproxy's members on port 11211): their
#: module's tests that use one share a worker too.
MODULE_FIXTURES = {"saved", "measured", "outcomes", "result", "members_11211", "pair",
                   "cluster"}
RAY_TESTS = Path(__file__).parent / "ray"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--leaks", action="store_true",
                     help="collect garbage after every test and fail the one that left a "
                          "socket or file open (slower: finds what the warnings summary shows "
                          "only as 'unclosed <socket ...>')")


@pytest.fixture(autouse=True)
def _leaks(request: pytest.FixtureRequest) -> Iterator[None]:
    """With ``--leaks``: what this test left open, found by a collection at its end, and what
    held it (the collected objects that referred to it)."""
    yield
    if not request.config.getoption("leaks"):
        return
    import gc
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        gc.set_debug(gc.DEBUG_SAVEALL)  # the garbage kept, to name what held each
        try:
            gc.collect()
        finally:
            gc.set_debug(0)
            garbage = list(gc.garbage)
            gc.garbage.clear()
    left = [w for w in seen if issubclass(w.category, ResourceWarning)]
    if left:
        said = [f"{w.message} (held by {_holders(w.source, garbage)})" for w in left]
        del garbage, left, seen
        pytest.fail("left open by this test: " + "; ".join(said), pytrace=False)


def _holders(leaked: object, garbage: list[object]) -> str:
    """The types (``module.Class``) of the objects that referred to ``leaked`` (the object a
    warning's ``source`` kept alive): collected ones, and ones a finalizer brought back."""
    import gc
    import warnings

    if leaked is None:
        return "?"

    def name(o: object) -> str:
        return f"{type(o).__module__}.{type(o).__qualname__}"

    names = set()
    for r in gc.get_referrers(leaked):
        if r is garbage or isinstance(r, warnings.WarningMessage):
            continue
        owners = [o for o in gc.get_referrers(r)
                  if getattr(o, "__dict__", None) is r and not isinstance(
                      o, warnings.WarningMessage)]
        if type(r) is dict and not owners and any(
                isinstance(o, warnings.WarningMessage) for o in gc.get_referrers(r)):
            continue  # a warning's own attributes
        # an instance's __dict__ is named by its instance
        names |= {name(o) for o in owners} if owners else {name(r)}
    # None: its holder let go of it in a finalizer that ran after the socket's own (an object
    # that closes its socket in __del__, collected in a cycle with it).
    return ", ".join(sorted(names)) or "nothing left: an object that closes it in __del__"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Groups the tests that share a costly session fixture (SHARED_FIXTURES), and the Ray
    tests (one local cluster, on fixed loopback addresses), for ``--dist loadgroup``; the Ray
    tests are all ``slow``."""
    for item in items:
        if "members_11211" in getattr(item, "fixturenames", ()):
            # twemproxy's members on port 11211 and the Ray cluster share 127.0.0.2-5: one
            # worker, so that neither takes the other's port.
            item.add_marker(pytest.mark.xdist_group("ray"))
            continue
        if RAY_TESTS in Path(item.path).parents:
            item.add_marker(pytest.mark.xdist_group("ray"))
            item.add_marker(pytest.mark.slow)
            continue
        used = getattr(item, "fixturenames", ())
        group = next((g for f, g in SHARED_FIXTURES.items() if f in used), None)
        if group is None:
            group = next((f"{Path(item.path).stem}::{f}" for f in MODULE_FIXTURES if f in used),
                         None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    # Longest first: xdist hands out the tests (a group as one unit) in this order as workers
    # free up, so a long unit started last is the suite's tail. The Ray group (one worker,
    # minutes), then the other groups (a costly fixture each), then the `slow` tests, then the
    # rest, each in collection order.
    items.sort(key=_dispatch_rank)


def _dispatch_rank(item: pytest.Item) -> int:
    groups = [m.args[0] for m in item.iter_markers("xdist_group") if m.args]
    if "ray" in groups:
        return 0
    if groups:
        return 1
    return 2 if item.get_closest_marker("slow") else 3


def pytest_collection_finish(session: pytest.Session) -> None:
    """In an xdist worker under ``--dist loadgroup``, every grouped test's id must carry its
    group (``@ray``): that is how xdist sends a group to one worker. pytest 9.2 builds ids
    another way and xdist 3.8's suffix is silently lost (pytest-dev/pytest-xdist#1386): two
    Ray clusters then start on the same addresses and the twemproxy members on port 11211
    in two workers. Refuse to run rather than run so."""
    if not (os.environ.get("PYTEST_XDIST_WORKER") and session.config.getvalue("loadgroup")):
        return
    lost = [i.nodeid for i in session.items
            if (groups := {str(m.args[0]) for m in i.iter_markers("xdist_group")})
            and not i.nodeid.endswith("@" + "_".join(sorted(groups)))]
    if lost:
        raise pytest.UsageError(
            f"pytest-xdist's --dist loadgroup does not group tests under pytest "
            f"{pytest.__version__} ({len(lost)} grouped tests have no @group in their id, e.g. "
            f"{lost[0]}): install the test extra's pytest (pip install -e '.[test]')")


@pytest.fixture(scope="session")
def memcached() -> Iterator[PrivateMemcached]:
    """A private memcached over TCP, shared by the whole session: do not stop or flush it."""
    with PrivateMemcached() as server:
        yield server


@pytest.fixture(scope="session")
def memcached_unix() -> Iterator[PrivateMemcached]:
    """A private memcached over a Unix socket, shared by the whole session."""
    with PrivateMemcached(unix_socket=True) as server:
        yield server


@pytest.fixture(scope="module")
def redis() -> Iterator[PrivateRedis]:
    """A private redis-server with a password (in ``redis.url``; redis-py's ``redis.client()``
    has it too), one per test module: its tests leave it empty, and do not stop or flush it.
    Skips the test when redis-server is not installed."""
    try:
        server = PrivateRedis(password=secret())
    except RuntimeError as e:
        pytest.skip(str(e))
    with server:
        yield server


@pytest.fixture(scope="module")
def pair() -> Iterator[list[PrivateRedis]]:
    """Two private redis-servers without a password, one pair per test module (a client-side
    pool, or the servers behind a twemproxy). Skips without redis-server."""
    try:
        a, b = PrivateRedis(), PrivateRedis()
    except RuntimeError as e:
        pytest.skip(str(e))
    with a, b:
        yield [a, b]


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateRedisCluster]:
    """A private 3-master Redis Cluster on 127.0.0.31-33, one per test module: its tests leave
    it empty and give back any slot they move. Skips without redis-server."""
    try:
        c = PrivateRedisCluster()
    except RuntimeError as e:
        pytest.skip(str(e))
    with c:
        yield c


@pytest.fixture(scope="session")
def postgresql_dsn() -> Iterator[str]:
    """A PostgreSQL DSN: ``CACHELAB_TEST_PG_DSN`` if set, else a private cluster started from the
    OS package's binaries for the session; skips the test when neither is available."""
    dsn = os.environ.get("CACHELAB_TEST_PG_DSN")
    if dsn:
        yield dsn
        return
    try:
        server = PrivatePostgres()
    except RuntimeError as e:
        pytest.skip(f"{e}; set CACHELAB_TEST_PG_DSN or install postgresql")
    with server:
        yield server.dsn


@pytest.fixture
def fresh_memcached() -> Iterator[PrivateMemcached]:
    """A private memcached for one test, which may kill, stop or restart it."""
    with PrivateMemcached() as server:
        yield server


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> InProcess:
    """``cli(*args, cwd=...)``: the ``cachelab`` command line run in this process (no child
    process start-up), returning a CompletedProcess with its exit code, stdout and stderr."""
    return InProcess(capsys)


@pytest.fixture
def fake_server() -> Iterator[Callable[[str], FakeServer]]:
    """A factory ``fake_server(behavior) -> FakeServer``; every fake stops at test end."""
    started: list[FakeServer] = []

    def start(behavior: str) -> FakeServer:
        server = FakeServer(behavior)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
