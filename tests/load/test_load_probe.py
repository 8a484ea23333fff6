"""``load --probe-rate``: the latency probe beside the load connections, against a real
memcached; and a saturated load client flagged as such."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cachelab import _core
from cachelab.errors import UsageError
from cachelab.load import LoadResult, LoadSpec, load
from cachelab.load.validity import CLIENT_BUSY, client_check
from cachelab.servers import PrivateMemcached
from cachelab.units import us
from clitools import InProcess, one_error_line
from schedules import poisson_bounds


@pytest.mark.parametrize("bad", ["0", "nan", "20000"])
def test_bad_probe_rates_exit_2_naming_the_range(cli: InProcess, bad: str,
                                                 tmp_path: Path) -> None:
    p = cli("load", "--probe-rate", bad, "--server", "127.0.0.1:1", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert (f"--probe-rate: must be a number above 0 and at most 10000, got {bad} "
            in one_error_line(p.stderr))


def test_a_bad_probe_rate_in_a_spec_is_refused_with_the_range() -> None:
    for bad in (0, -1.0, float("nan"), 1e5, "10"):
        with pytest.raises(UsageError, match="probe-rate must be a number of requests/s above "
                                             "0 and at most 10000"):
            LoadSpec(probe_rate=bad).check()  # type: ignore[arg-type]


def test_the_probe_sends_its_rate_on_the_runs_keys_and_the_server_counts_it(
    cli: InProcess, tmp_path: Path, memcached: PrivateMemcached
) -> None:
    rate, warmup, duration = 400.0, 0.5, 2.0
    out = tmp_path / "o"
    p = cli("load", "--server", memcached.address, "--rate", "2000", "--duration",
            str(duration), "--warmup", str(warmup), "--interval", "0.5", "--mix", "get=100",
            "--key-space", "300", "--probe-rate", str(rate), "--no-plots", "--out", out,
            "--format", "table", cwd=tmp_path)
    # Measured (0), or 1 only because a busy machine kept the client from holding the rate.
    assert p.returncode == 0 or (p.returncode == 1 and "rate not held" in p.stderr), p.stderr
    d = json.loads((out / "load.json").read_text())
    probe = d["probe"]
    # Every request the probe's schedule made due was sent or is counted as left unsent:
    # a Poisson count of the rate over the sending phase.
    due = probe["all"]["sent"] + probe["backlog_at_end"] + probe["skipped_disconnected"]
    low, high = poisson_bounds(rate, warmup + duration)
    assert low <= due <= high, (due, low, high)
    # Every request it sent is a get, answered, or lost (in flight when its connection
    # failed: a busy machine's timeouts, 100 of 1,074 once beside two helpers' builds), or
    # answered with an error. ``errors`` counts those replies and the connection's faults
    # (a timeout is one fault, its requests lost): at most one per request not otherwise
    # accounted for.
    pa = probe["all"]
    lost, errors = int(pa.get("lost", 0)), sum((pa.get("errors") or {}).values())
    failed = lost + errors
    assert pa["ops"]["get"] + lost <= pa["sent"] <= pa["ops"]["get"] + failed, pa
    assert {k: n for k, n in pa["ops"].items() if k != "get"} == {
        "multiget": 0, "set": 0, "delete": 0}
    # On the run's prefix and key space: the prefilled keys, so every probe get hits.
    assert pa["hits"] == pa["replies"] > 0
    # The server counted the probe's gets with the load connections' (and any the client
    # gave up on, which it may have answered too late).
    answered = d["all"]["ops"]["get"] + pa["ops"]["get"]
    gave_up = failed + int(d["all"].get("lost", 0)) + sum((d["all"].get("errors") or {}).values())
    assert answered <= d["server"]["deltas"]["cmd_get"] <= answered + gave_up
    # Its own row: corrected latencies, with intervals, and its own verdict.
    h = probe["totals"]["corrected"]
    assert h["count"] == probe["totals"]["replies"] > 0
    assert "basis" in h["intervals"] and probe["validity"]["verdict"] in ("VALID", "INVALID")
    assert probe["client"]["queueing"]["sends"] > 0
    rows = [line.split() for line in p.stdout.splitlines() if line.startswith("probe ")]
    assert [r[:2] for r in rows] == [["probe", us(h["percentiles"]["50"])],
                                     ["probe", "sent"]]
    assert "probe: 1 connection on its own thread at 400/s (Poisson)" in p.stdout
    assert LoadResult.from_dict(d).probe == probe
    # The report's load table has the probe's rows, and a finding compares the two p99s.
    assert cli("report", out, "--out", tmp_path / "report.html").returncode == 0
    page = (tmp_path / "report.html").read_text()
    assert "probe p99 latency" in page and "probe verdict" in page
    assert "The latency probe (1 connection at 400/s on its own thread) saw p50" in page


def test_a_counted_runs_probe_stops_with_the_load(memcached: PrivateMemcached) -> None:
    r = load(LoadSpec(requests=3000, duration=None, warmup=0, mix={"get": 1.0},
                      key_space=100, probe_rate=1000), server=memcached.address)
    assert r.all["sent"] == 3000
    assert r.probe is not None and r.probe["all"]["errors"] == {}
    assert r.probe["elapsed_s"] <= r.run["elapsed_s"] + 2.0  # stopped, not run for an hour


def test_the_probes_sets_are_deleted_and_its_errors_are_the_runs(
    memcached: PrivateMemcached,
) -> None:
    # Sets over a large key space: the probe's keys are (almost all) not the load's.
    space = 100_000
    r = load(LoadSpec(rate=300, duration=1.0, warmup=0, interval=0.5, mix={"set": 1.0},
                      key_space=space, probe_rate=300, connections=1),
             server=memcached.address)
    assert r.probe is not None and r.probe["all"]["ops"]["set"] > 0
    assert r.run["leftover_keys"] == 0
    prefix = r.spec["prefix_used"]
    with _core.Client(memcached.address) as c:
        for lo in range(0, space, 5000):
            assert not c.get_multi([f"{prefix}:{i}" for i in range(lo, lo + 5000)])
    # The probe's errors count in the run's problems (the exit code).
    r.probe["all"]["errors"] = {"timeout": 2}
    assert r.problems()["errors"] == sum(r.all["errors"].values()) + 2


def test_client_check_reads_the_busy_share() -> None:
    busy = {"cpu_s": 0.95, "run_queue_wait_s": 0.02, "threads": 1, "wall_s": 1.0,
            "share": 0.97}
    out = client_check(busy)
    assert out["status"] == "fail" and out["why"].startswith("CLIENT SATURATED")
    assert client_check({**busy, "share": CLIENT_BUSY - 0.01})["status"] == "pass"
    assert client_check(busy, busy_poll_us=50)["status"] == "not checked"
    assert client_check(None)["status"] == "not checked"


def test_a_starved_client_is_flagged_as_saturated(memcached: PrivateMemcached) -> None:
    # The load thread made a client that cannot keep up: moved, once it exists, onto one CPU
    # kept busy by a spinning process, at the idle scheduling class, it runs only when
    # nothing else on that CPU wants to: its requests' replies wait for it, not it for them.
    cpu = max(os.sched_getaffinity(0))
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                           preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    starved: set[int] = set()

    def starve(_progress: object) -> None:
        for task in Path("/proc/self/task").iterdir():
            tid = int(task.name)
            try:
                name = (task / "comm").read_text().strip()
            except OSError:  # the thread ended meanwhile
                continue
            if name.startswith("cachelab-load-") and tid not in starved:
                os.sched_setaffinity(tid, {cpu})
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
                starved.add(tid)

    try:
        r = load(LoadSpec(connections=4, duration=1.0, warmup=0.2, interval=0.5,
                          mix={"get": 1.0}, key_space=100, prefill=False),
                 server=memcached.address, on_progress=starve)
    finally:
        hog.kill()
        hog.wait(timeout=10)
    assert starved, "the load thread was never seen"
    v = r.validity
    assert v is not None
    if v["checks"]["client"]["status"] != "fail":
        # A machine so loaded that the server waited for a CPU too: the client then also
        # waited for replies, not only for its CPU, and was not saturated by the definition.
        # (Seen once beside two helpers' builds: busy 76 %, the server's threads waiting.)
        server_wait = (r.server.get("schedstat") or {}).get("run_queue_wait_s") or 0.0
        assert server_wait >= 0.1 and r.client["busy"]["share"] >= 0.5, (
            v["checks"]["client"], r.server.get("schedstat"))
        return
    assert r.client["busy"]["share"] >= CLIENT_BUSY
    lines = r.render().splitlines()
    assert lines[0].startswith("INVALID: CLIENT SATURATED: the load client's 1 thread(s)")
    assert any(line.startswith("client threads busy") and line.endswith("CLIENT SATURATED")
               for line in lines)
