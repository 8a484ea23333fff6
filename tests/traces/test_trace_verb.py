"""``cachelab.trace.run``: the trace verb's one entry — each subcommand is a spec, the CLI's
subcommands are that call, and a capture watches the servers of the Target parsed once from
the shared flags (a proxy, or no server, refused with what to give instead)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cachelab import trace
from cachelab.errors import UsageError
from cachelab.servers import PrivateMemcached
from cachelab.target import Target
from cachelab.traces.capture import CaptureSpec, read_capture
from cachelab.traces.synth import SynthParams
from clitools import InProcess


def test_each_subcommand_is_a_spec_of_the_one_entry(cli: InProcess, tmp_path: Path) -> None:
    made = trace.run(trace.SynthSpec(SynthParams.quick(requests=500, seed=4),
                                     tmp_path / "t.jsonl"))
    assert made.written == tmp_path / "t.jsonl" and made.to_dict()["requests"] == 500
    seen = trace.run(trace.InspectSpec(tmp_path / "t.jsonl"))
    p = cli("trace", "inspect", tmp_path / "t.jsonl", "--format", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == seen.to_dict()
    assert seen.render().splitlines()[0] == f"{tmp_path / 't.jsonl'} (jsonl, request trace)"
    done = trace.run(trace.ConvertSpec(tmp_path / "t.jsonl", tmp_path / "t.csv"))
    assert done.to_dict()["accesses"] > 0 and (tmp_path / "t.csv").is_file()
    with pytest.raises(UsageError, match="not a trace spec"):
        trace.run(SynthParams())  # type: ignore[arg-type]


def test_a_capture_takes_its_servers_from_the_target() -> None:
    spec = CaptureSpec(duration=1.0)
    one = trace.capture_servers(spec, Target(servers=("127.0.0.1:11311",)))
    assert (one.server, one.servers) == ("127.0.0.1:11311", ())
    pool = trace.capture_servers(spec, Target(servers=("127.0.0.1:11311:3", "[::1]:11312")))
    assert pool.servers == ("127.0.0.1:11311", "[::1]:11312")       # weights dropped
    sock = trace.capture_servers(spec, "unix:/run/memcached.sock")
    assert sock.server == "unix:/run/memcached.sock"
    # A spec that names its server is used as it is without a target, never beside one.
    assert trace.capture_servers(one, None) is one
    with pytest.raises(UsageError, match="not both"):
        trace.capture_servers(one, "127.0.0.1:11312")
    with pytest.raises(UsageError, match="give --server HOST:PORT"):
        trace.capture_servers(spec, None)
    with pytest.raises(UsageError, match=r"not a proxy \(127.0.0.1:22122"):
        trace.capture_servers(spec, Target(servers=("127.0.0.1:11311",),
                                           proxy="127.0.0.1:22122"))


def test_capture_through_the_entry_and_the_shared_flags(
        cli: InProcess, memcached: PrivateMemcached, memcached_unix: PrivateMemcached,
        tmp_path: Path) -> None:
    r = trace.run(trace.CaptureFileSpec(CaptureSpec(duration=0.2), tmp_path / "a.capture.parquet"),
                  Target(servers=(memcached.address,)))
    assert r.ended == "duration" and r.server["address"] == memcached.address
    _, meta = read_capture(tmp_path / "a.capture.parquet")
    assert meta["server"]["address"] == memcached.address
    # --socket is the shared flag's: the Target it makes is the one captured.
    assert memcached_unix.socket_path is not None
    p = cli("trace", "capture", "--socket", memcached_unix.socket_path, "--duration", "0.2",
            "--out", tmp_path / "u", "--format", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["server"]["address"] == f"unix:{memcached_unix.socket_path}"


@pytest.mark.parametrize(("flags", "error"), [
    (["--proxy", "127.0.0.1:22122", "--server", "127.0.0.1:11311"],
     "cachelab: error: trace capture watches memcached servers, not a proxy (127.0.0.1:22122: "
     "twemproxy has no `watch`): give the servers behind it as --server (repeated) or "
     "--servers-file, without --proxy"),
    (["--server", "127.0.0.1:11311", "--socket", "/run/memcached.sock"],
     "cachelab: error: give --server or --socket, not both"),
    ([], "cachelab: error: trace capture watches a running memcached: give --server HOST:PORT "
     "(repeat it for a pool), --servers-file or --socket"),
])
def test_what_a_capture_cannot_watch_is_one_line_exit_2(
        cli: InProcess, tmp_path: Path, flags: list[str], error: str) -> None:
    p = cli("trace", "capture", *flags, "--duration", "1", "--out", tmp_path / "c")
    assert p.returncode == 2
    assert p.stderr.splitlines() == [error]
    assert not (tmp_path / "c").exists()
