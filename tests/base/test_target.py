"""One target: the server flags parsed once (cli/target.py target_from), opened and closed by
cachelab.target.Target, and every verb's one entry deciding its variant from it."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

import cachelab.load as load
from cachelab.childproc import ChildProcess
from cachelab.cli import build_parser
from cachelab.cli.target import target_from
from cachelab.errors import TwemproxyNotInstalled, UsageError
from cachelab.progress import Progress
from cachelab.proxies import PrivateTwemproxy, find_nutcracker
from cachelab.servers import PrivateMemcached, ServerOptions
from cachelab.target import Target, as_target


def _args(*argv: str):
    return build_parser().parse_args([str(a) for a in argv])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes: /proc says so.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ", 1)[1][0] != "Z"


def test_the_flags_make_one_target() -> None:
    one = target_from(_args("load", "--server", "10.0.0.1:11211"))
    assert (one.servers, one.proxy, one.private, one.is_pool) == (
        ("10.0.0.1:11211",), None, False, False)
    assert one.address == one.server() == "10.0.0.1:11211"

    pool = target_from(_args("load", "--server", "10.0.0.1:11211", "--server",
                             "10.0.0.2:11211:2", "--distribution", "modula",
                             "--member-retry", "3"))
    assert pool.is_pool and pool.address is None
    assert pool.server() == ["10.0.0.1:11211", "10.0.0.2:11211:2"]
    assert dict(pool.pool) == {"distribution": "modula", "member_retry": 3.0}

    proxy = target_from(_args("scale", "--proxy", "10.0.0.9:22121", "--server",
                              "10.0.0.1:11211", "--server", "10.0.0.2:11211"))
    assert proxy.address == proxy.server() == "10.0.0.9:22121"
    assert proxy.behind == ["10.0.0.1:11211", "10.0.0.2:11211"] and not proxy.is_pool

    private = target_from(_args("profile", "--server-memory", "32", "--server-threads", "2"))
    assert private.private and private.options == ServerOptions(memory_mb=32, threads=2)

    drill = target_from(_args("load", "--private-pool", "3", "--private-proxy"))
    assert (drill.private_pool, drill.private_proxy, drill.servers) == (3, True, ())

    socket = target_from(_args("replay", "--socket", "/tmp/mc.sock"))
    assert socket.address == "unix:/tmp/mc.sock"

    # simulate: --server (the server whose profile is measured first) or none at all
    assert target_from(_args("simulate", "--server", "10.0.0.1:11211")).address == \
        "10.0.0.1:11211"
    assert target_from(_args("simulate")) == Target()
    assert target_from(_args("usl", "data.csv")) == Target()


@pytest.mark.parametrize("argv, message", [
    (("load", "--private-pool", "2", "--server", "10.0.0.1:11211"), "starts its own servers"),
    (("load", "--private-pool", "2", "--proxy", "10.0.0.9:1"), "local run straight"),
    (("load", "--proxy", "10.0.0.9:1"), "needs the servers behind it"),
    (("tiers", "--server", "a:1", "--server", "b:2"), "measures one server"),
    (("load", "--distribution", "modula"), "is for a pool"),
])
def test_flags_that_do_not_go_together_are_refused(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        target_from(_args(*argv))


def test_a_target_given_as_an_address_or_members() -> None:
    assert as_target(None) == Target()
    assert as_target("10.0.0.1:11211").servers == ("10.0.0.1:11211",)
    assert as_target(["a:1", "b:2"]).is_pool
    with pytest.raises(UsageError, match="proxy alone"):
        Target.of(["a:1", "b:2"], behind=["c:3"])


def test_opening_a_private_target_starts_a_server_and_stops_it() -> None:
    with Target(options=ServerOptions(memory_mb=8, threads=1)).open(memory_mb=16) as live:
        assert live.private is not None and live.private.running
        assert live.facts["private"] is True and "-m" in live.facts["argv"]
        assert live.private.memory_mb == 16  # the larger of the options and what the run needs
        assert live.addresses == live.checked == [live.address]
        pid = live.pid
        assert pid is not None and _alive(pid)
    assert not _alive(pid)


def test_opening_a_given_server_starts_nothing(memcached: PrivateMemcached) -> None:
    with Target.of(memcached.address).open() as live:
        assert live.address == memcached.address and live.private is None
        assert live.pid is None and live.facts == {"private": False}


def test_a_private_pool_behind_a_private_proxy_is_opened_and_closed() -> None:
    try:
        find_nutcracker()
    except TwemproxyNotInstalled as e:
        pytest.skip(str(e))
    target = Target(options=ServerOptions(memory_mb=8), private_pool=2, private_proxy=True)
    with target.open(spares=1, proxy={"distribution": "ketama", "hash": "md5"}) as live:
        assert live.proxy is not None and live.given == [live.proxy.address]
        assert live.address == live.proxy.address
        assert live.behind == [mc.address for mc in live.owned[:2]] == live.checked
        assert len(live.owned) == 3 and live.spares == [live.owned[2].address]
        pids = [mc.pid for mc in live.owned] + [live.proxy.pid]
        assert all(p is not None and _alive(p) for p in pids)
    assert not any(_alive(p) for p in pids if p is not None)


def test_memcached_and_twemproxy_are_one_kind_of_child_process() -> None:
    assert issubclass(PrivateMemcached, ChildProcess)
    assert issubclass(PrivateTwemproxy, ChildProcess)
    # one stop: the same code, not a copy
    assert PrivateMemcached.stop is ChildProcess.stop is PrivateTwemproxy.stop
    assert PrivateMemcached.start is ChildProcess.start is PrivateTwemproxy.start


def test_load_run_drives_a_private_pool_from_the_target() -> None:
    """The verb decides the variant from the target: a private pool of two is started,
    driven as a pool (a row per member), and stopped."""
    spec = dataclasses.replace(load.LoadSpec.quick(), duration=None, requests=400, warmup=0,
                               key_space=200, connections=2)
    result = load.run(spec, Target(options=ServerOptions(memory_mb=8), private_pool=2))
    assert [m["replies"] > 0 for m in result.members] == [True, True]
    assert result.server["private"] is True and result.spec["private_pool"] == 2


def test_progress_says_a_line_without_a_terminal(tmp_path: Path) -> None:
    path = tmp_path / "err"
    with path.open("w") as stream, Progress(None, "scale", stream=stream) as bar:
        assert not bar.enabled
        bar.say("scale: 1/3 N = 1: 1,000/s")
    assert path.read_text() == "scale: 1/3 N = 1: 1,000/s\n"
