"""Connecting to a Ray cluster is bounded and can be interrupted: an address where nothing
listens, or where something listens and never answers (a silent TCP listener of the test's
own), ends the command with exit 3 and one line naming the address; Ctrl-C during the connect
ends it with exit 130. The ``ray://`` route (Ray Client) runs ``simulate`` and ``load`` on the
shared test cluster (tests/ray/conftest.py), whose head runs a Ray Client server as ``ray start
--head`` does; and once connected, SIGTERM still ends a run with its partial result. Only
those last tests use the cluster."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cachelab.servers import read_stats
from clitools import InProcess, cachelab, one_error_line
from rayaddrs import HEAD_IP

#: No Ray node listens on this loopback address (the test cluster uses 127.0.0.2-4).
NOWHERE = "127.0.0.9"

#: What each verb needs besides --ray to get as far as connecting (nothing is measured).
VERBS = {
    "load": ["load", "--server", "127.0.0.1:1", "--duration", "1"],
    "simulate": ["simulate", "--quick"],
    "scale": ["scale", "--vary", "agents", "--points", "1", "--server", "127.0.0.1:1"],
}

#: Seconds a CLI run may take to start (Python, cachelab and Ray imports) on a loaded machine.
STARTUP = 25


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent() -> Iterator[socket.socket]:
    """A TCP listener on NOWHERE that accepts connections and never says anything."""
    with socket.socket() as s:
        s.bind((NOWHERE, 0))
        s.listen(64)
        s.settimeout(60)
        yield s


def _address(s: socket.socket) -> str:
    return f"{NOWHERE}:{s.getsockname()[1]}"


def _timed(*args: object, limit: float) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    try:
        done = cachelab(*args, timeout=limit)
    except subprocess.TimeoutExpired:
        pytest.fail(f"cachelab {' '.join(map(str, args))} still running after {limit:g} s")
    return done, time.monotonic() - start


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_nothing_listening_is_exit_3_at_once_naming_the_address(verb: str) -> None:
    address = f"{NOWHERE}:{_free_port(NOWHERE)}"
    done, _ = _timed(*VERBS[verb], "--ray", address, limit=STARTUP + 30)
    assert done.returncode == 3, (done.stdout, done.stderr)
    line = one_error_line(done)
    assert f"no Ray cluster answered at {address}: connection refused" in line
    assert "ray start --head" in line


@pytest.mark.slow
@pytest.mark.parametrize("verb", ["load", "simulate"])
def test_a_listener_that_never_answers_is_exit_3_within_the_ray_timeout(
        verb: str, silent: socket.socket) -> None:
    done, elapsed = _timed(*VERBS[verb], "--ray", _address(silent), "--ray-timeout", "3",
                           limit=STARTUP + 60)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    # The first line is ours: Ray's own retry log was kept off stderr while it connected.
    first = done.stderr.strip().splitlines()[0]
    assert first == (f"cachelab: error: no Ray cluster answered at {_address(silent)} within "
                     "3 s (is `ray start --head` running there?)")
    assert 3 <= elapsed < 3 + STARTUP


@pytest.mark.slow
def test_ctrl_c_while_connecting_ends_the_command_with_130(silent: socket.socket) -> None:
    command = [sys.executable, "-m", "cachelab", *VERBS["simulate"], "--ray", _address(silent)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        try:
            # cachelab's TCP try, then Ray's own connection: Ray is connecting.
            for _ in range(2):
                silent.accept()[0].close()
            time.sleep(0.5)
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err
    assert took < 5, f"exited {took:.1f} s after SIGINT"
    assert "Traceback" not in err
    assert err.strip().splitlines()[0] == "cachelab: interrupted"


def test_no_address_and_no_cluster_on_this_machine_is_exit_3(tmp_path: Path) -> None:
    # Ray looks for the cluster `ray start` left on this machine under RAY_TMPDIR (/tmp).
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = cachelab(*VERBS["simulate"], "--ray", "--ray-timeout", "20",
                    env={**env, "RAY_TMPDIR": str(tmp_path)}, timeout=STARTUP + 30)
    assert done.returncode == 3, done.stderr
    assert one_error_line(done) == (
        "cachelab: error: no Ray cluster found on this machine (--ray without ADDRESS and "
        "$RAY_ADDRESS unset: start one with `ray start --head`, or give --ray ADDRESS)")


def test_ray_timeout_is_checked() -> None:
    done = cachelab(*VERBS["simulate"], "--ray", "127.0.0.9:1", "--ray-timeout", "0")
    assert done.returncode == 2
    assert "argument --ray-timeout: must be a number above 0" in one_error_line(done)


def test_an_address_without_a_port_is_a_usage_error() -> None:
    done = cachelab(*VERBS["simulate"], "--ray", NOWHERE)
    assert done.returncode == 2
    assert f"--ray {NOWHERE}: give HOST:PORT" in one_error_line(done)


def test_ray_extra_installs_ray_client() -> None:
    """``pip install 'cachelab[ray]'`` (and the test extra) bring Ray Client, which the
    ``ray://HEAD:10001`` route and ``ray start --head``'s client server need."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    for extra in ("ray", "test"):
        ray = [r for r in extras[extra] if r.startswith("ray")]
        assert ray and all(r.startswith("ray[client]") for r in ray), (extra, ray)


def test_ray_scheme_without_ray_client_says_how_to_get_it(silent: socket.socket) -> None:
    code = ("import sys; sys.modules['grpc'] = None; from cachelab.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    done = subprocess.run(
        [sys.executable, "-c", code, *VERBS["simulate"], "--ray", f"ray://{_address(silent)}",
         "--ray-timeout", "20"], capture_output=True, text=True, timeout=STARTUP + 30)
    assert done.returncode == 2, done.stderr
    assert "needs Ray Client" in one_error_line(done)
    assert "pip install 'cachelab[ray]'" in done.stderr


@pytest.fixture
def client_address(request: pytest.FixtureRequest) -> str:
    """The test cluster's ``ray://`` address (skipped, before the cluster starts, without Ray
    Client)."""
    if importlib.util.find_spec("grpc") is None:
        pytest.skip("Ray Client (grpcio) is not installed: `make install` installs the "
                    "[test] extra, which has ray[client]")
    address = request.getfixturevalue("ray_cluster").client_address
    assert address is not None
    return str(address)


@pytest.mark.slow
def test_simulate_through_ray_client(client_address: str, tmp_path: Path) -> None:
    done = cachelab(*VERBS["simulate"], "--ray", client_address, "--out", tmp_path / "sim",
                    "--no-plots", timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "sim" / "simulate.json").read_text())
    assert len(result["strategies"]) >= 2


@pytest.mark.slow
def test_load_through_ray_client(client_address: str, ray_cluster, ray_memcached,
                                 tmp_path: Path) -> None:
    done = cachelab("load", "--ray", client_address, "--agents", "1",
                    "--server", ray_memcached.address, "--rate", "300", "--connections", "1",
                    "--duration", "1", "--key-space", "500", "--out", tmp_path / "load",
                    "--no-plots", timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "load" / "load.json").read_text())
    (agent,) = result["agents"]["list"]
    assert agent["node_ip"] in ray_cluster.node_ips
    assert result["totals"]["replies"] > 0


@pytest.mark.slow
def test_sigterm_during_load_on_ray_keeps_the_partial_result(ray_cluster, ray_memcached,
                                                             tmp_path: Path) -> None:
    """Ray's core worker, once connected, installs its own SIGTERM handler (a stack trace,
    then abort); cachelab puts its own back, so SIGTERM ends the run as Ctrl-C does."""
    out = tmp_path / "load"
    command = [sys.executable, "-m", "cachelab", "load", "--ray", ray_cluster.address,
               "--ray-node-ip", HEAD_IP, "--agents", "1", "--server", ray_memcached.address,
               "--rate", "300", "--connections", "1", "--duration", "120", "--key-space", "500",
               "--out", out, "--no-plots"]
    def gets() -> int:
        return int(read_stats(ray_memcached.address)["cmd_get"])

    before = gets()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        try:
            deadline = time.monotonic() + 90
            # The agent's gets reaching the server: the run is under way.
            while gets() < before + 200:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the load never reached the server"
                time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err
    assert "SIGTERM received" not in err and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"cachelab: error: interrupted; partial results saved in {out}")
    result = json.loads((out / "load.json").read_text())
    assert result["run"]["cancelled"] is True
    assert result["all"]["replies"] > 0  # warm-up included: the signal may come during it


def _grpc_error() -> Exception:
    """A real gRPC error: a call to an address where nothing listens (UNAVAILABLE)."""
    grpc = pytest.importorskip("grpc")
    with grpc.insecure_channel(f"{NOWHERE}:1") as channel:
        try:
            channel.unary_unary("/cachelab.Test/Nothing")(b"", timeout=10)
        except grpc.RpcError as e:
            return e
    raise AssertionError("a gRPC call to nowhere succeeded")


def test_a_broken_ray_client_connection_is_one_line_exit_3(
        cli: InProcess, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Once Ray Client's data channel is gone (its log says "Unrecoverable error in data
    channel."), every call raises the ConnectionError its data client words around the gRPC
    error that broke it: exit 3 and one line naming the address, not a traceback."""
    import ray

    broken = ConnectionError("Failed during this or a previous request. Exception that broke "
                             f"the connection: {_grpc_error()}")

    def put(*args: object, **kwargs: object) -> None:
        raise broken

    monkeypatch.setattr(ray, "is_initialized", lambda: True)  # connected; then it breaks
    monkeypatch.setattr(ray, "put", put)
    p = cli("simulate", "--quick", "--ray", f"ray://{NOWHERE}:10001", "--out", tmp_path / "s",
            "--no-plots", "--format", "json")
    assert p.returncode == 3
    line = one_error_line(p)
    assert line.startswith(f"cachelab: error: lost the connection to the Ray cluster at "
                           f"ray://{NOWHERE}:10001: UNAVAILABLE: "), line
    assert line.endswith("(is the cluster still up and reachable? run again; if Ray Client "
                         "keeps dropping under load, connect by the head's GCS address, --ray "
                         "HEAD:6379, from a machine in the cluster's network)"), line


def test_only_rays_connection_errors_are_mapped() -> None:
    from cachelab.errors import RayConnectionLost, ServerUnreachable
    from cachelab.raycluster import connection_errors

    gone = _grpc_error()  # a gRPC error that escapes Ray Client
    with pytest.raises(RayConnectionLost, match=r"at 10\.0\.0\.7:6379: UNAVAILABLE: .* run "
                       r"again\)$"), connection_errors("10.0.0.7:6379"):
        raise gone
    with pytest.raises(RayConnectionLost, match="cluster on this machine: Client is shutting"), \
            connection_errors("auto"):
        raise ConnectionError("Client is shutting down.")
    # cachelab's own errors, and the OS's socket errors (a memcached's), pass unchanged.
    for error in (ServerUnreachable("127.0.0.1:1: connection refused"),
                  ConnectionRefusedError(111, "Connection refused")):
        with pytest.raises(type(error)) as raised, connection_errors("ray://10.0.0.7:10001"):
            raise error
        assert raised.value is error
