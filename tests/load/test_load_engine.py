"""``cachelab.load``: spec parsing, and runs against a real memcached."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from cachelab import _core
from cachelab import load as lib
from cachelab.errors import InputError, UsageError
from cachelab.servers import PrivateMemcached, find_memcached

# -- spec parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("uniform", ("uniform", [])),
        ("zipf:0.99", ("zipf", [0.99])),
        ("gaussian", ("gaussian", [])),
        ("gaussian:0.05", ("gaussian", [0.05])),
        ("sequential", ("sequential", [])),
        ("hotset:20%:80%", ("hotset", [0.2, 0.8])),
        ("hotset:0.1:0.9", ("hotset", [0.1, 0.9])),
    ],
)
def test_key_distributions_parse(text: str, parsed: tuple[str, list[float]]) -> None:
    assert lib.parse_key_dist(text) == parsed


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("100", ("fixed", [100.0])),
        ("1K", ("fixed", [1000.0])),
        ("fixed:4KiB", ("fixed", [4096.0])),
        ("uniform:10:1K", ("uniform", [10.0, 1000.0])),
        ("lognormal:1K:0.5", ("lognormal", [1000.0, 0.5])),
        ("histogram:100=3,1K=1", ("histogram", [100.0, 3.0, 1000.0, 1.0])),
    ],
)
def test_value_sizes_parse(text: str, parsed: tuple[str, list[float]]) -> None:
    assert lib.parse_value_size(text) == parsed


@pytest.mark.parametrize(
    "bad",
    ["pareto", "zipf", "zipf:x", "hotset:20%", "uniform:1"],
)
def test_bad_key_distributions_are_usage_errors(bad: str) -> None:
    with pytest.raises(UsageError):
        lib.parse_key_dist(bad)


@pytest.mark.parametrize(
    "bad", ["0", "-5", "uniform:10", "lognormal:1K", "histogram:100=x", "histogram:100=0", "foo:1"]
)
def test_bad_value_sizes_are_usage_errors(bad: str) -> None:
    with pytest.raises(UsageError):
        lib.parse_value_size(bad)


def test_histogram_file_errors_name_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "sizes.csv"
    f.write_text("size,weight\n100,3\n# comment\n1K,1\n2K\n")
    with pytest.raises(InputError, match=r"sizes\.csv:5"):
        lib.parse_value_size(f"histogram:{f}")
    f.write_text("100,3\n1K,1\n")
    assert lib.parse_value_size(f"histogram:{f}") == ("histogram", [100.0, 3.0, 1000.0, 1.0])


def test_mix_parses_from_text_and_tables() -> None:
    assert lib.parse_mix("get=90,set=10") == {"get": 90.0, "set": 10.0}
    assert lib.parse_mix({"multiget": 1}) == {"multiget": 1.0}
    for bad in ("get=90,put=10", "get", "get=-1", "get=0"):
        with pytest.raises(UsageError):
            lib.parse_mix(bad)


def test_spec_from_toml(tmp_path: Path) -> None:
    f = tmp_path / "w.toml"
    f.write_text(
        'connections = 8\nrate = 5000\nkey-dist = "zipf:0.99"\nvalue_size = "uniform:10:1K"\n'
        "mix = { get = 80, multiget = 10, set = 10 }\nduration = 5\n"
    )
    spec = lib.LoadSpec.from_toml(f)
    assert (spec.connections, spec.rate, spec.key_dist) == (8, 5000, "zipf:0.99")
    assert spec.mix == {"get": 80, "multiget": 10, "set": 10}
    f.write_text("pipeline = 16\nsend-batch = 8\n")
    assert lib.LoadSpec.from_toml(f).to_core("127.0.0.1:1", "x")["send_batch"] == 8


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("connections = 8\nconections = 9\n", r"w\.toml:2: unknown setting 'conections'"),
        ("connections = \n", r"w\.toml: not valid TOML.*line 1"),
        ('key_dist = "pareto"\n', r"w\.toml: key distribution"),
        ("connections = 0\n", r"w\.toml: connections must be"),
        ("pipeline = 4\nsend-batch = 8\n",
         r"w\.toml: send-batch must be at most the pipeline depth \(4\), not 8"),
    ],
)
def test_bad_toml_names_the_file(tmp_path: Path, text: str, match: str) -> None:
    f = tmp_path / "w.toml"
    f.write_text(text)
    with pytest.raises(InputError, match=match):
        lib.LoadSpec.from_toml(f)


def test_caps_are_enforced_in_rust(memcached: PrivateMemcached) -> None:
    for over, match in [
        ({"connections": 5000, "threads": 1},
         "connections must be a whole number from 1 to 4096, not 5000"),
        ({"rate": 6e6}, "rate must be a number of requests/s above 0 and at most 5000000"),
        ({"duration": 4000.0}, "duration must be a number of seconds above 0 and at most 3600"),
        ({"key_space": 10**9}, "key-space must be a whole number of keys from 1 to 100000000"),
    ]:
        with pytest.raises(UsageError, match=match):
            lib.load(lib.LoadSpec(**over), server=memcached.address)


# -- runs against memcached ----------------------------------------------------------------------


def test_hits_and_misses_match_the_server_exactly(memcached: PrivateMemcached) -> None:
    spec = lib.LoadSpec(
        connections=4, threads=2, pipeline=4, requests=20_000, duration=None, warmup=0,
        mix={"get": 60, "multiget": 10, "set": 20, "delete": 10}, multiget_keys=5,
        key_space=3000, key_dist="zipf:0.9", value_size="uniform:10:500", prefill=False, seed=5,
    )
    r = lib.load(spec, server=memcached.address)
    d = r.server["deltas"]
    assert r.all["replies"] == 20_000
    assert r.all["hits"] == d["get_hits"]
    assert r.all["misses"] == d["get_misses"]
    assert r.all["hits"] > 0 and r.all["misses"] > 0
    assert r.all["errors"] == {} and r.problems() == {}
    # Every key set was deleted again: none of this run's keys is left.
    assert r.run["leftover_keys"] == 0
    prefix = r.spec["prefix_used"]
    with _core.Client(memcached.address) as c:
        assert c.get_multi([f"{prefix}:{i}" for i in range(0, 3000, 7)]) == {}


def test_prefilled_gets_all_hit_and_steady_totals_leave_warmup_out(
    memcached: PrivateMemcached,
) -> None:
    spec = lib.LoadSpec(duration=2, warmup=1, interval=0.5, key_space=500,
                        mix={"get": 1}, connections=2, seed=1)
    r = lib.load(spec, server=memcached.address)
    assert r.run["prefilled_keys"] == 500 and r.run["deleted_keys"] == 500
    assert r.all["misses"] == 0 and r.all["hits"] == r.server["deltas"]["get_hits"]
    assert [iv["warmup"] for iv in r.intervals[:2]] == [True, True]
    assert r.steady["start_index"] >= 2
    assert r.totals["replies"] < r.all["replies"]


def test_open_loop_holds_its_rate(memcached: PrivateMemcached) -> None:
    # 2,000 requests/s is far below what loopback memcached serves: the schedule decides.
    spec = lib.LoadSpec(rate=2000, duration=3, warmup=0.5, connections=4, key_space=1000,
                        seed=2)
    r = lib.load(spec, server=memcached.address)
    assert r.schedule is not None, r.schedule
    if r.schedule["held"]:
        sent_rate = r.all["sent"] / (spec.duration + spec.warmup)
        assert sent_rate == pytest.approx(2000, rel=0.1)
    else:  # a machine too busy for the schedule (1,307/s seen beside a CPU hog) says so
        assert "rate_not_held" in r.problems(), r.schedule
    assert r.totals["corrected"]["count"] == r.totals["replies"]
    c, u = r.totals["corrected"]["percentiles"], r.totals["uncorrected"]["percentiles"]
    assert all(c[k] >= u[k] for k in ("50", "99"))  # from the intended time, never earlier


def test_open_loop_says_when_it_cannot_hold_the_rate(memcached: PrivateMemcached) -> None:
    # One connection with one request in flight cannot do 2M requests/s over loopback.
    spec = lib.LoadSpec(rate=2_000_000, duration=1, warmup=0, connections=1,
                        max_outstanding=1, key_space=100)
    r = lib.load(spec, server=memcached.address)
    assert r.schedule is not None and not r.schedule["held"]
    assert r.schedule["backlog_at_end"] > 0
    assert "rate_not_held" in r.problems()


def _memcached_on(port: int) -> subprocess.Popen[bytes]:
    p = subprocess.Popen(
        [find_memcached(), "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-u", "root", "-t", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            with _core.Client(f"127.0.0.1:{port}", timeout=0.5) as c:
                c.version()
                return p
        except Exception:
            time.sleep(0.02)
    p.kill()
    raise RuntimeError("memcached did not start")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_server_killed_mid_run_counts_errors_and_reconnects() -> None:
    port = _free_port()
    server = _memcached_on(port)
    box: dict[str, object] = {}
    spec = lib.LoadSpec(duration=4.5, warmup=0, interval=0.5, connections=2, key_space=200,
                        mix={"get": 1}, prefill=False, give_up_after=10, timeout=0.5)

    def work() -> None:
        box["result"] = lib.load(spec, server=f"127.0.0.1:{port}")

    t = threading.Thread(target=work)
    t.start()
    try:
        time.sleep(1.2)
        server.kill()
        server.wait()
        time.sleep(1.0)
        server = _memcached_on(port)
        t.join(30)
        assert not t.is_alive(), "the run hung"
    finally:
        server.kill()
        server.wait()
    r = box["result"]
    assert isinstance(r, lib.LoadResult)
    errors = r.all["errors"]
    assert set(errors) & {"closed", "reset", "connect_refused"}, errors
    assert r.intervals[0]["replies"] > 0
    # Connections came back: the last whole intervals have replies again.
    assert r.intervals[-2]["replies"] > 0
    assert "errors" in r.problems()


def test_stalled_server_gives_timeouts_not_a_hang(fresh_memcached: PrivateMemcached) -> None:
    import os
    import signal

    box: dict[str, object] = {}
    spec = lib.LoadSpec(duration=3, warmup=0, interval=0.5, connections=2, key_space=100,
                        mix={"get": 1}, prefill=False, timeout=0.3, give_up_after=20)
    pid = fresh_memcached.pid
    assert pid is not None

    def work() -> None:
        box["result"] = lib.load(spec, server=fresh_memcached.address)

    t = threading.Thread(target=work)
    t.start()
    try:
        time.sleep(0.8)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(1.0)
    finally:
        os.kill(pid, signal.SIGCONT)
    t.join(30)
    assert not t.is_alive(), "the run hung"
    r = box["result"]
    assert isinstance(r, lib.LoadResult)
    assert r.all["errors"].get("timeout", 0) >= 1
    assert r.all["lost"] >= 1


def test_unreachable_server_is_a_server_error() -> None:
    from cachelab.errors import ServerUnreachable

    with pytest.raises(ServerUnreachable):
        lib.load(lib.LoadSpec(duration=1), server=f"127.0.0.1:{_free_port()}")


#: The command line run with statsmodels imported first: the verdict imports it only for a
#: series its KPSS test rejects (~130 MB, run to run), which a comparison of two runs' memory
#: must not see.
_CLI_WITH_STATSMODELS = ("import sys, statsmodels.tsa.stattools; from cachelab.cli import main; "
                         "sys.exit(main(sys.argv[1:]))")


def _max_rss_mb(*args: object, errors: Path) -> float:
    """Runs the ``cachelab ARGS`` command line to its end (stderr to ``errors``), statsmodels
    imported first; its own peak resident memory, MB."""
    import os
    import sys

    with errors.open("wb") as err:
        child = subprocess.Popen([sys.executable, "-c", _CLI_WITH_STATSMODELS, *map(str, args)],
                                 stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    assert child.returncode == 0, errors.read_text()
    return usage.ru_maxrss / 1024  # KB on Linux


def test_memory_does_not_grow_with_the_number_of_intervals(
    memcached: PrivateMemcached, tmp_path: Path,
) -> None:
    # A run keeps every interval's two histograms to its end. Kept whole, each is ~0.27 MB
    # however few values it holds: 400 intervals took 207 MB more than 4 (an hour at 1 s
    # intervals would take 1.9 GB). Packed, they take a few KB each.
    def peak(interval: float) -> float:
        return _max_rss_mb("load", "--server", memcached.address, "--rate", 2000,
                           "--connections", 2, "--duration", 2, "--warmup", 0,
                           "--interval", interval, "--key-space", 200, "--no-plots",
                           "--out", tmp_path / str(interval), "--format", "json",
                           errors=tmp_path / f"{interval}.stderr")

    few, many = peak(1.0), peak(0.01)  # 2 intervals, 200: ~100 MB more, kept whole
    assert many - few < 40, (few, many)


def test_hlog_is_readable_by_the_hdrhistogram_library(
    memcached: PrivateMemcached, tmp_path: Path
) -> None:
    hdrh_log = pytest.importorskip("hdrh.log")
    from hdrh.histogram import HdrHistogram

    spec = lib.LoadSpec(rate=1000, duration=1.5, warmup=0, interval=0.5, key_space=100)
    r = lib.load(spec, server=memcached.address)
    path = tmp_path / "load.hlog"
    path.write_text(lib.hlog_text(r))
    reader = hdrh_log.HistogramLogReader(str(path), HdrHistogram(1, 3600 * 10**9, 3))
    counts = []
    while (h := reader.get_next_interval_histogram()) is not None:
        counts.append(h.get_total_count())
    reader.close()
    expected = []
    for iv in r.intervals:
        expected += [iv["corrected"]["count"], iv["uncorrected"]["count"]]
    assert counts == expected


# -- the private server and the result's artifacts -------------------------------------------


def test_private_server_comes_from_the_options_with_room_for_the_key_space() -> None:
    from cachelab.servers import ServerOptions

    spec = lib.LoadSpec(duration=0.5, warmup=0, interval=0.25, key_space=20_000,
                        value_size="2K", mix={"get": 1}, seed=3)
    need = lib.memory_mb(spec)
    assert need > 32
    r = lib.load(spec, server_options=ServerOptions(memory_mb=32, threads=2))
    argv = r.server["argv"]
    assert r.server["private"] is True and r.server["address"].startswith("127.0.0.1:")
    assert argv[argv.index("-t") + 1] == "2"
    assert argv[argv.index("-m") + 1] == str(need)
    if Path("/proc/self/schedstat").exists():  # the private server's pid went to the engine
        assert r.server["schedstat"]["pid"] is not None
    assert r.run["prefilled_keys"] == 20_000 and r.run["leftover_keys"] == 0


def test_write_makes_every_artifact_and_render_summarises(
    memcached: PrivateMemcached, tmp_path: Path
) -> None:
    spec = lib.LoadSpec(duration=1, warmup=0, interval=0.5, key_space=100, seed=4)
    before = time.time()
    r = lib.load(spec, server=memcached.address)
    written = r.write(tmp_path / "o", plots=False)
    assert [p.name for p in written] == ["load.json", "load.csv", "load.hlog"]
    # The run's start as a Unix time, also the interval log's StartTime (it was once this
    # process's CPU seconds).
    assert before - 1 <= r.run["started_unix"] <= time.time(), r.run["started_unix"]
    assert f"#[StartTime: {r.run['started_unix']:.3f} " in written[2].read_text()
    back = lib.LoadResult.from_dict(json.loads(written[0].read_text()))
    assert back.to_dict() == json.loads(json.dumps(r.to_dict()))  # tuples become lists
    text = r.render()
    # First the verdict (docs/load.md, "Validity"; an "also:" line may follow it on a noisy
    # machine), then where the run went.
    lines = text.splitlines()
    verdict = lines[0]
    assert verdict.startswith(("VALID: ", "INVALID: ")) and r.validity is not None
    assert verdict.startswith(r.validity["verdict"] + ": ")
    where = next(i for i, line in enumerate(lines) if line.startswith("memcached "))
    assert lines[where] == f"memcached {r.server['version']} at {memcached.address}"
    assert all(line.startswith("  also: ") for line in lines[1:where]), lines[:where]
    assert "closed loop, 4 connection(s) on 1 thread(s), pipeline 1" in text
    # The verdict's own CPU (issue 33: its statistics libraries cost the client seconds).
    cpu = next(line for line in lines if line.startswith("client CPU: "))
    spent = r.client["verdict_cpu_s"]
    assert spent > 0 and cpu.endswith(f"; the verdict {spent:.2f} s (its statistics "
                                      "libraries' import included)"), cpu
    assert text.splitlines()[-1] == "keys: 100 prefilled, 100 deleted at the end"
