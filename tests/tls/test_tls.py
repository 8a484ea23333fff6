"""TLS end to end: the OS memcached started with ``-Z`` and certificates made here (openssl
CLI), a plain (``notls:``) listener beside the TLS one; profile, load, scale, errors, SNI and
the tiered cache over TLS."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import cachelab._core as _core
import testcerts
from cachelab.errors import TlsHandshakeFailed, UsageError
from cachelab.servers import PrivateMemcached
from cachelab.tiered import LRUMemory, MemcachedTier, TieredCache
from cachelab.tiered.backends import PymemcacheTier
from cachelab.tls import TlsOptions
from clitools import InProcess, cachelab, one_error_line
from privateredis import PrivateRedis

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="the openssl command makes the test certificates")

#: A name only the SNI test's certificate holds (no IP address in it).
ONLY_NAME = "cache.test"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("certs")
    ca = testcerts.ca(d, "test-ca")
    other = testcerts.ca(d, "other-ca")
    server = testcerts.leaf(d, "server", ca, "IP:127.0.0.1,DNS:localhost")
    named = testcerts.leaf(d, "named", ca, f"DNS:{ONLY_NAME}")
    return {"ca": ca[0], "other_ca": other[0], "server_cert": server[0],
            "server_key": server[1], "named_cert": named[0], "named_key": named[1]}


@pytest.fixture(scope="module")
def tls_memcached(certs: dict[str, Path]) -> Iterator[PrivateMemcached]:
    """memcached with a TLS listener (``tls_address``) and a plain one (``address``)."""
    with PrivateMemcached(threads=2, tls_files=(str(certs["server_cert"]),
                                                str(certs["server_key"]))) as mc:
        yield mc


def _plain_port(mc: PrivateMemcached) -> str:
    return mc.address.rsplit(":", 1)[1]


@pytest.mark.slow
def test_profile_over_tls_reports_the_tls_cost(tls_memcached: PrivateMemcached,
                                               certs: dict[str, Path], tmp_path: Path) -> None:
    r = cachelab("profile", "--server", tls_memcached.tls_address, "--tls", "--cacert",
                 certs["ca"], "--plain-port", _plain_port(tls_memcached), "--quick",
                 "--sizes", "100", "--no-multiget", "--samples", "200", "--warmup", "10",
                 "--no-plots", "--out", tmp_path, "--format", "table")
    assert r.returncode == 0, r.stderr
    assert "TLS cost" in r.stdout and "measuring TLS connection" in r.stdout
    d = json.loads((tmp_path / "profile.json").read_text())
    assert d["server"]["transport"] == "tls"
    assert d["client"]["tls"]["verify"] == "cacert"
    cost = d["tls_cost"]
    new = cost["new_connection"]
    assert new["tls"]["count"] == new["tcp"]["count"] == cost["connections"]
    # A TLS handshake is at least one more round trip and public-key work: never cheaper.
    assert new["tls"]["p50_ns"] > new["tcp"]["p50_ns"]
    for transport in ("tls", "tcp"):
        assert cost["request"][transport]["get"]["count"] > 0
        assert cost["request"][transport]["floor"]["count"] > 0
    floor = next(c for c in d["cells"] if c["op"] == "floor")
    assert floor["samples"] == 200 and not floor["errors"]


def test_profile_over_tls_without_a_plain_listener_says_so(
        cli: InProcess, tls_memcached: PrivateMemcached, certs: dict[str, Path],
        tmp_path: Path) -> None:
    r = cli("profile", "--server", tls_memcached.tls_address, "--tls", "--cacert",
            certs["ca"], "--quick", "--sizes", "100", "--no-multiget", "--samples", "50",
            "--warmup", "5", "--no-plots", "--out", tmp_path, "--format", "table")
    assert r.returncode == 0, r.stderr
    assert "no plain listener given" in r.stdout
    d = json.loads((tmp_path / "profile.json").read_text())
    assert d["tls_cost"]["new_connection"]["tcp"] is None
    assert d["tls_cost"]["request"]["tcp"] is None


def test_load_closed_loop_over_tls(cli: InProcess, tls_memcached: PrivateMemcached,
                                   certs: dict[str, Path], tmp_path: Path) -> None:
    r = cli("load", "--server", tls_memcached.tls_address, "--tls", "--cacert",
            certs["ca"], "--quick", "--duration", "1", "--warmup", "0.2",
            "--connections", "2", "--pipeline", "4", "--no-plots", "--out", tmp_path,
            "--format", "table")
    assert r.returncode == 0, r.stderr
    d = json.loads((tmp_path / "load.json").read_text())
    assert d["server"]["transport"] == "tls"
    assert d["spec"]["tls"] == {"verify": "cacert", "sni": None, "client_certificate": False}
    assert d["totals"]["replies"] > 100
    assert not any(d["totals"].get("errors", {}).values())
    # Every key was set first (over TLS the set-up batches stay small; see setup.rs).
    assert d["run"]["prefilled_keys"] == d["spec"]["key_space"]


def test_load_over_plain_tcp_records_tcp(
        cli: InProcess, tls_memcached: PrivateMemcached, tmp_path: Path) -> None:
    r = cli("load", "--server", tls_memcached.address, "--quick", "--duration", "0.5",
            "--warmup", "0", "--connections", "1", "--no-plots", "--out", tmp_path,
            "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["server"]["transport"] == "tcp"


def test_scale_over_tls(cli: InProcess, tls_memcached: PrivateMemcached, certs: dict[str, Path],
                        tmp_path: Path) -> None:
    r = cli("scale", "--server", tls_memcached.tls_address, "--tls", "--cacert",
            certs["ca"], "--quick", "--points", "1,2", "--repeats", "1", "--warmup", "0.1",
            "--settle", "0.2", "--window", "0.5", "--interval", "0.1", "--bootstrap", "100",
            "--no-plots", "--out", tmp_path, "--format", "json")
    assert r.returncode in (0, 1), r.stderr  # 1: the USL fit of two points may be poor
    d = json.loads((tmp_path / "scale.json").read_text())
    assert d["spec"]["tls"]["verify"] == "cacert"
    assert all(run["throughput"] > 0 for run in d["runs"])


def test_a_certificate_from_another_ca_fails_in_one_line(
        cli: InProcess, tls_memcached: PrivateMemcached, certs: dict[str, Path],
        tmp_path: Path) -> None:
    r = cli("profile", "--server", tls_memcached.tls_address, "--tls", "--cacert",
            certs["other_ca"], "--quick", "--out", tmp_path)
    assert r.returncode == 3
    line = one_error_line(r)
    assert tls_memcached.tls_address in line and "TLS handshake failed" in line
    assert "certificate" in line


def test_tls_to_a_plain_listener_fails_fast_and_clearly(
        cli: InProcess, tls_memcached: PrivateMemcached, certs: dict[str, Path],
        tmp_path: Path) -> None:
    started = time.monotonic()
    r = cli("load", "--server", tls_memcached.address, "--tls", "--cacert", certs["ca"],
            "--quick", "--out", tmp_path)
    assert r.returncode == 3
    line = one_error_line(r)
    assert f"{tls_memcached.address}: TLS handshake failed" in line
    assert "memcached -Z" in line  # the hint: this is not a TLS listener
    assert time.monotonic() - started < 10  # bounded by the connect timeout, never a hang


@pytest.mark.parametrize("verb", ["profile", "load"])
def test_plain_tcp_to_a_tls_listener_is_named_with_the_hint(
        cli: InProcess, tls_memcached: PrivateMemcached, tmp_path: Path, verb: str) -> None:
    """memcached -Z hangs up on a client that does not speak TLS: named with the address and
    --tls, not "connection error: Connection reset by peer (os error 104)"."""
    r = cli(verb, "--server", tls_memcached.tls_address, "--quick", "--out", tmp_path)
    assert r.returncode == 3, r.stdout
    assert one_error_line(r) == (f"cachelab: error: {tls_memcached.tls_address} closed the "
                                 "connection at once: a TLS listener? try --tls")


def test_skip_verify_accepts_a_certificate_of_another_ca(
        tls_memcached: PrivateMemcached, certs: dict[str, Path]) -> None:
    tls = TlsOptions(cacert=str(certs["other_ca"]), skip_verify=True)
    with _core.Client(tls_memcached.tls_address, tls=tls.to_core()) as c:
        assert c.version().startswith("1.")
    with pytest.raises(TlsHandshakeFailed, match="certificate"):
        _core.Client(tls_memcached.tls_address, tls=TlsOptions(
            cacert=str(certs["other_ca"])).to_core())


def test_sni_names_the_server_to_verify(certs: dict[str, Path]) -> None:
    files = (str(certs["named_cert"]), str(certs["named_key"]))
    with PrivateMemcached(threads=1, tls_files=files) as mc:
        address = mc.tls_address
        assert address is not None
        ca = str(certs["ca"])
        with pytest.raises(TlsHandshakeFailed, match="not valid for name"):
            _core.Client(address, tls=TlsOptions(cacert=ca).to_core())
        with _core.Client(address, tls=TlsOptions(cacert=ca, sni=ONLY_NAME).to_core()) as c:
            assert c.set("cachelab:tls:sni", b"x") and c.get("cachelab:tls:sni") == b"x"
            c.delete("cachelab:tls:sni")


@pytest.mark.parametrize(("args", "message"), [
    (["--cacert", "CA"], "--cacert needs --tls"),
    (["--tls", "--cert", "CA"], "--cert and --key go together"),
    (["--tls", "--cacert", "/nonexistent/ca.pem"], "--cacert /nonexistent/ca.pem: no such file"),
    (["--tls-skip-verify"], "--tls-skip-verify needs --tls"),
])
def test_tls_flags_are_checked_before_anything_runs(
        cli: InProcess, tls_memcached: PrivateMemcached, certs: dict[str, Path], tmp_path: Path,
        args: list[str], message: str) -> None:
    args = [str(certs["ca"]) if a == "CA" else a for a in args]
    r = cli("load", "--server", tls_memcached.tls_address, *args, "--out", tmp_path)
    assert r.returncode == 2
    assert message in one_error_line(r)


def test_tls_needs_a_named_server(cli: InProcess, tmp_path: Path) -> None:
    r = cli("profile", "--tls", "--quick", "--out", tmp_path)
    assert r.returncode == 2
    assert "--tls needs --server" in one_error_line(r)


def test_a_bad_pem_file_is_a_usage_error(tls_memcached: PrivateMemcached,
                                         tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    with pytest.raises(UsageError, match="--cacert .*bad.pem"):
        _core.Client(tls_memcached.tls_address, tls=TlsOptions(cacert=str(bad)).to_core())


def test_tiered_cache_over_tls(tls_memcached: PrivateMemcached, certs: dict[str, Path]) -> None:
    tier = MemcachedTier(tls_memcached.tls_address, tls=TlsOptions(cacert=str(certs["ca"])))
    cache = TieredCache(tier, LRUMemory(max_bytes=1 << 20), prefix="tlstest")
    users = cache.key_class("user", loader=lambda ids: {i: {"id": i} for i in ids})
    cache.put(users, 7, {"id": 7, "name": "seven"})
    other = TieredCache(tier, LRUMemory(max_bytes=1 << 20), prefix="tlstest")
    users2 = other.key_class("user", loader=lambda ids: {})
    assert other.get(users2, 7) == {"id": 7, "name": "seven"}  # from memcached, over TLS


def test_pymemcache_tier_over_tls(tls_memcached: PrivateMemcached,
                                  certs: dict[str, Path]) -> None:
    context = ssl.create_default_context(cafile=str(certs["ca"]))
    tier = PymemcacheTier.connect(tls_memcached.tls_address, timeout=2, connect_timeout=2,
                                  tls_context=context)
    try:
        assert tier.set("cachelab:tls:pm", b"value", 0, 0)
        assert tier.get_multi(["cachelab:tls:pm"]) == {"cachelab:tls:pm": b"value"}
        tier.delete("cachelab:tls:pm")
    finally:
        tier.close()


# -- compare --server-cmd over TLS ----------------------------------------------------------


def _tls_cmd(certs: dict[str, Path], threads: int) -> str:
    return (f"memcached -t {threads} -Z -o ssl_chain_cert={certs['server_cert']},"
            f"ssl_key={certs['server_key']}")


def test_a_server_listening_over_tls_is_probed_over_tls(certs: dict[str, Path]) -> None:
    tls = TlsOptions(cacert=str(certs["ca"]))
    flags = ["-Z", "-o", f"ssl_chain_cert={certs['server_cert']},ssl_key={certs['server_key']}"]
    with PrivateMemcached(threads=1, extra_args=flags, tls=tls) as mc:
        assert mc.tls_address == mc.address and mc.version is not None
        with _core.Client(mc.address, tls=tls.to_core()) as c:
            assert c.stats()["pid"] == str(mc.pid) and c.version() == mc.version
    # The same server probed with a CA that did not sign it: the start fails at the handshake.
    bad = PrivateMemcached(threads=1, extra_args=flags, start_timeout=10,
                           tls=TlsOptions(cacert=str(certs["other_ca"])))
    started = time.monotonic()
    with pytest.raises(TlsHandshakeFailed, match="UnknownIssuer"):
        bad.start()
    assert time.monotonic() - started < 9 and not bad.running
    with pytest.raises(UsageError, match="not both"):
        PrivateMemcached(tls=tls, tls_files=(str(certs["server_cert"]),
                                             str(certs["server_key"])))


def test_compare_server_commands_over_tls(
        cli: InProcess, certs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "ab"
    cmds = [_tls_cmd(certs, 1), _tls_cmd(certs, 2)]
    r = cli("compare", "--tls", "--cacert", certs["ca"], "--server-cmd", cmds[0],
            "--server-cmd", cmds[1], "--repeats", "2", "--duration", "0.5",
            "--no-plots", "--out", out, "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads((out / "compare.json").read_text())
    assert d["kind"] == "servers" and d["sources"] == cmds
    assert d["settings"]["transport"] == "tls"
    assert d["settings"]["tls"] == {"verify": "cacert", "sni": None, "client_certificate": False}
    assert "over TLS" in d["method"]
    for server in d["settings"]["servers"]:
        assert server["transport"] == "tls" and "-Z" in server["argv"]
    assert {x["metric"] for x in d["rows"]} >= {"throughput", "p50", "run-queue wait"}
    for name in ("A-1", "A-2", "B-1", "B-2"):
        doc = json.loads((out / "rounds" / name / "load.json").read_text())
        assert doc["server"]["transport"] == "tls" and doc["spec"]["tls"]["verify"] == "cacert"
        assert doc["totals"]["replies"] > 0
        assert not any(doc["totals"].get("errors", {}).values())
        # stats were read (over TLS: the server has no plain listener) before and after,
        # and count this round's gets; the run-queue wait is the server's own schedstat.
        before, after = doc["server"]["stats_before"], doc["server"]["stats_after"]
        assert int(after["cmd_get"]) > int(before["cmd_get"])
        assert doc["server"]["schedstat"]["threads"] >= 1


def test_compare_tls_to_a_command_without_tls_fails_in_one_line(
        cli: InProcess, certs: dict[str, Path], tmp_path: Path) -> None:
    started = time.monotonic()
    r = cli("compare", "--tls", "--cacert", certs["ca"], "--server-cmd",
            _tls_cmd(certs, 1), "--server-cmd", "memcached -t 1", "--repeats", "2",
            "--duration", "0.5", "--out", tmp_path / "ab")
    assert r.returncode == 3, r.stderr
    line = one_error_line(r)
    assert "B server 'memcached -t 1' did not start: 127.0.0.1:" in line
    assert "TLS handshake failed" in line and "add -Z" in line
    # Failed at the handshake, not at the 10 s start timeout.
    assert time.monotonic() - started < 9


@pytest.mark.parametrize(("args", "message"), [
    (["--tls", "RESULT", "RESULT"], "--tls is for the live A/B (--server-cmd)"),
    (["--server-cmd", "memcached -t 1", "--server-cmd", "memcached -t 1 -Z"],
     "'memcached -t 1 -Z' listens over TLS (-Z): give --tls"),
    (["--cacert", "CA", "--server-cmd", "memcached", "--server-cmd", "memcached"],
     "--cacert needs --tls"),
])
def test_compare_tls_usage_errors(cli: InProcess, certs: dict[str, Path], tmp_path: Path,
                                  args: list[str], message: str) -> None:
    results = tmp_path / "load.json"
    args = [str(certs["ca"]) if a == "CA" else str(results) if a == "RESULT" else a
            for a in args]
    r = cli("compare", *args, "--out", tmp_path / "ab")
    assert r.returncode == 2, r.stderr
    assert message in one_error_line(r)
    assert not (tmp_path / "ab").exists()


@pytest.mark.slow
def test_load_over_rediss_verifies_the_redis_servers_certificate(
    tmp_path: Path, certs: dict[str, Path]
) -> None:
    """``--server rediss://…`` is RESP over TLS: verified against --cacert (the run's
    requests counted by the server's TLS listener), refused against another CA."""
    tls = (str(certs["server_cert"]), str(certs["server_key"]), str(certs["ca"]))
    with PrivateRedis(tls=tls) as server:
        url = f"rediss://127.0.0.1:{server.tls_port}"
        base = [sys.executable, "-m", "cachelab", "load", "--server", url, "--duration", "1",
                "--warmup", "0.5", "--key-space", "100", "--no-plots", "--format", "json"]
        ok = subprocess.run([*base, "--cacert", str(certs["ca"]), "--out", str(tmp_path / "a")],
                            capture_output=True, text=True, timeout=120)
        assert ok.returncode == 0, ok.stderr
        saved = json.loads((tmp_path / "a" / "load.json").read_text())
        assert saved["server"]["transport"].startswith("tls"), saved["server"]["transport"]
        assert saved["server"]["protocol"] == "resp" and saved["all"]["errors"] == {}
        assert saved["server"]["deltas"]["keyspace_hits"] > 0
        assert server.client().dbsize() == 0
        bad = subprocess.run([*base, "--cacert", str(certs["other_ca"]),
                              "--out", str(tmp_path / "b")],
                             capture_output=True, text=True, timeout=120)
        assert bad.returncode == 3, bad.stderr
        assert "certificate" in bad.stderr.lower(), bad.stderr


@pytest.mark.slow
def test_profile_over_rediss_measures_every_cell_over_tls(
    tmp_path: Path, certs: dict[str, Path], cli: InProcess
) -> None:
    """``profile --server rediss://…`` is RESP over TLS: every cell and the floor (PING) over
    the TLS listener, verified against --cacert, the server's INFO read over it too."""
    tls = (str(certs["server_cert"]), str(certs["server_key"]), str(certs["ca"]))
    with PrivateRedis(tls=tls) as server:
        out = tmp_path / "p"
        p = cli("profile", "--server", f"rediss://127.0.0.1:{server.tls_port}", "--quick",
                "--samples", "20", "--warmup", "2", "--sizes", "100", "--keys", "1,3",
                "--cacert", certs["ca"], "--no-plots", "--format", "json", "--out", out)
        assert p.returncode == 0, p.stderr
        saved = json.loads((out / "profile.json").read_text())
        assert saved["server"]["transport"] == "tls" and saved["server"]["protocol"] == "resp"
        assert saved["client"]["floor_command"] == "PING"
        assert all(c["samples"] == 20 and not c["errors"] for c in saved["cells"])
        assert saved["server"]["calls"]["get"] == saved["client"]["commands"]["GET"]
        assert server.client().dbsize() == 0


@pytest.mark.slow
def test_trace_capture_over_rediss_reads_monitor_over_tls(
    tmp_path: Path, certs: dict[str, Path], cli: InProcess
) -> None:
    """``trace capture --server rediss://…`` reads MONITOR over the TLS listener (verified
    against --cacert) while a client sends over the plain one; refused against another CA."""
    tls = (str(certs["server_cert"]), str(certs["server_key"]), str(certs["ca"]))
    with PrivateRedis(tls=tls) as server:
        url = f"rediss://127.0.0.1:{server.tls_port}"
        stop = threading.Event()

        def traffic() -> None:
            c = server.client()
            deadline, i = time.monotonic() + 30, 0
            while not stop.is_set() and time.monotonic() < deadline:   # until captured
                c.set(f"tls-capture:{i % 20}", b"v" * 9)
                i += 1
                time.sleep(0.001)
            c.delete(*[f"tls-capture:{i}" for i in range(20)])
            c.close()

        t = threading.Thread(target=traffic)
        t.start()
        try:
            ok = cli("trace", "capture", "--server", url, "--cacert", certs["ca"],
                     "--max-events", "30", "--duration", "20", "--out", tmp_path / "a",
                     "--format", "json")
        finally:
            stop.set()
            t.join(30)
        assert ok.returncode == 0, ok.stderr
        d = json.loads(ok.stdout)
        assert d["server"]["transport"] == "tls" and d["ended"] == "max_events"
        assert d["ops"] == {"set": 30}
        bad = cli("trace", "capture", "--server", url, "--cacert", certs["other_ca"],
                  "--duration", "1", "--out", tmp_path / "b", "--format", "json")
        assert bad.returncode == 3, bad.stderr
        assert "certificate" in bad.stderr.lower(), bad.stderr
