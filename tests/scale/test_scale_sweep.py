"""``cachelab scale``: spec checks, interleaved order, and a quick sweep against a private
memcached that produces a fitted curve and a readable artifact."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cachelab.errors import InputError, UsageError
from cachelab.scale import ScaleSpec, read_scale_result, scale
from cachelab.scale.answers import ceiling_line
from cachelab.scale.verdicts import verdict_lines
from cachelab.usl import MIN_POINTS


def test_order_is_interleaved_and_alternating() -> None:
    spec = ScaleSpec(points=[4, 1, 2], repeats=3)
    assert spec.order() == [(0, 1), (0, 2), (0, 4), (1, 4), (1, 2), (1, 1),
                            (2, 1), (2, 2), (2, 4)]


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"vary": "disks"}, "vary must be one of"),
        ({"points": [1, 1, 2]}, "must not repeat"),
        ({"points": [0, 1]}, "whole numbers >= 1"),
        ({"repeats": 0}, "repeats"),
        ({"window": 0.1, "interval": 0.5}, "window must be at least one interval"),
        ({"workload": {"connections": 3}}, "must not set connections"),
    ],
)
def test_bad_specs(over: dict, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        ScaleSpec(**over).check()


def test_run_specs_by_vary() -> None:
    assert ScaleSpec(vary="connections").run_spec(6).connections == 6
    t = ScaleSpec(vary="threads", connections_per_thread=2).run_spec(3)
    assert (t.threads, t.connections) == (3, 6)
    s = ScaleSpec(vary="server-threads", client_connections=12).run_spec(5)
    assert (s.threads, s.connections) == (1, 12)


def test_server_threads_needs_a_private_server() -> None:
    with pytest.raises(UsageError, match="private memcached"):
        scale(ScaleSpec(vary="server-threads"), server="127.0.0.1:11211")


# The quick sweep measures for 18 s and takes some 20 s on a quiet machine; the rest is CPU
# work (start-up, each run's verdict, the fit, the plots), 100 s and more on a loaded 2-core
# machine: a bound against a hang, not on the machine's speed.
SWEEP_TIMEOUT = 300


@pytest.mark.slow
@pytest.mark.timeout(SWEEP_TIMEOUT + 30)
def test_quick_sweep_fits_a_curve(tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "cachelab", "scale", "--quick", "--out", str(out),
                        "--format", "json", "--bootstrap", "100"],
                       capture_output=True, text=True, timeout=SWEEP_TIMEOUT, cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    data = json.loads(p.stdout)
    assert data["schema"] == "cachelab.scale"
    assert len(data["runs"]) == 12
    assert all(r["throughput"] > 0 for r in data["runs"])
    # A run INVALID for its throughput (a loaded machine's stall or drift) is left out of the
    # fit, and named in the notes; every other run is one of the fit's points.
    kept = [r for r in data["runs"] if not r["throughput_reasons"]]
    left_out = [r for r in data["runs"] if r["throughput_reasons"]]
    for r in left_out:
        assert any(m.startswith(f"left out of the fit, INVALID: N = {r['n']} (repeat "
                                f"{r['repeat'] + 1}): ") for m in data["limits"]), data["limits"]
    if len(kept) < MIN_POINTS or len({r["n"] for r in kept}) < 3:  # a machine far too busy
        assert data["fit"] is None and any("no fit" in m for m in data["limits"])
        return
    assert data["fit"] is not None and data["fit"]["gamma"] > 0
    for row in data["summary"]:  # each point's p99 with its interval, or why none
        iv = row["latency"]["p99_interval"]
        p99 = row["latency"]["percentiles_ns"]["99"]
        assert (iv["range"][0] <= p99 <= iv["range"][1]) if iv["range"] else iv["withheld"]
    r = read_scale_result(out)
    fit = r.usl
    assert fit is not None and fit.gamma > 0
    assert sorted(fit.n) == sorted(r["n"] for r in kept), (fit.n, left_out)
    # Where the client and the private server ran: pinned apart on a small machine, else
    # sharing its CPUs.
    said = ("for the sweep (this machine has" if r.server["cpus"]["pinned"]
            else "share this machine")
    assert any(said in m for m in r.limits), r.limits
    for name in ("scale-usl.png", "scale-usl.svg", "scale-latency.png", "scale.csv"):
        assert (out / name).stat().st_size > 100


def test_reading_a_non_scale_file_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "scale.json").write_text("{\"schema\": \"x\"}")
    with pytest.raises(InputError, match="not a cachelab scale result"):
        read_scale_result(tmp_path)


def test_server_threads_restarts_a_private_server_per_point(tmp_path: Path) -> None:
    from cachelab.servers import ServerOptions

    spec = ScaleSpec.quick(vary="server-threads", points=[1, 2, 3], repeats=1, warmup=0.1,
                           settle=0.25, window=0.25, interval=0.25, bootstrap=0)
    r = scale(spec, server_options=ServerOptions(threads=4, memory_mb=32))
    assert [run["n"] for run in r.runs] == [1, 2, 3]
    assert r.server["address"] == "private (restarted per point)" and r.server["private"]
    assert r.fit is None and any("no fit" in m for m in r.limits)
    written = r.write(tmp_path, plots=False)
    assert [p.name for p in written] == ["scale.json", "scale.csv"]
    assert read_scale_result(tmp_path).runs == r.runs
    # The headline: the verdicts (these short runs may fail latency checks), then the sweep.
    lines = r.render().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("scale sweep: "))
    assert lines[first].startswith("scale sweep: N = server-threads, 3 run(s)")
    # (and, when the client saturated from the peak up, that scaling is not measurable)
    ceiling = ceiling_line(r.to_dict())
    assert lines[:first] == [*verdict_lines(r.spec, r.runs), *([ceiling] if ceiling else [])]


def _fake_run(n: int, x: float, *, throughput_bad: str = "", latency_bad: str = "",
              latency_check: str = "independent") -> dict:
    reasons = [r for r in (throughput_bad, latency_bad) if r]
    failed = ([latency_check] if latency_bad else []) + (["stationary"] if throughput_bad else [])
    return {"n": n, "repeat": 0, "throughput": x, "latency": {"histogram": None},
            "errors": 0, "lost": 0, "steady_reached": True,
            "verdict": "INVALID" if reasons else "VALID", "invalid_reasons": reasons,
            "failed_checks": failed,
            "throughput_reasons": [throughput_bad] if throughput_bad else []}


def test_each_n_s_mean_throughput_is_over_the_runs_in_the_fit() -> None:
    """Two repeats per N; at N = 3 one repeat stalled (a third of the throughput, INVALID for
    it): N = 3's mean and sd are the VALID repeat's alone, the table says 1 of 2 runs is in
    the fit, and --keep-invalid puts it back in both the fit and the mean."""
    from cachelab.scale.sweep import _result

    spec = ScaleSpec(points=[1, 2, 3, 4, 5], repeats=2, bootstrap=0)
    xs = {n: 1000 * n / (1 + 0.05 * (n - 1)) for n in spec.points}
    runs = []
    for rep in range(2):
        for n in spec.points:
            stalled = n == 3 and rep == 1
            runs.append({**_fake_run(n, xs[n] * (1 / 3 if stalled else 1 + rep / 100),
                                     throughput_bad="not stationary: 1 stall(s)"
                                     if stalled else ""), "repeat": rep})
    r = _result(spec, runs, {"address": "x"})
    at = {row["n"]: row for row in r.to_dict()["summary"]}
    assert at[3]["throughput_mean"] == pytest.approx(xs[3]) and at[3]["throughput_sd"] is None
    assert (at[3]["runs"], at[3]["throughput_runs"]) == (2, 1)
    assert at[2]["throughput_mean"] == pytest.approx(xs[2] * 1.005)
    assert at[2]["throughput_runs"] == 2 and at[2]["throughput_sd"] > 0
    assert r.fit is not None and sorted(r.fit["n"]) == [1, 1, 2, 2, 3, 4, 4, 5, 5]
    row3 = next(line for line in r.render().splitlines() if line.split()[:1] == ["3"])
    # X mean, in fit 1/2; its latencies passed their checks (the stall is a throughput's)
    assert row3.split()[1] == f"{xs[3]:,.0f}" and row3.split()[3] == "1/2", row3
    assert row3.split()[-1] == "VALID", row3
    assert "X mean and sd: the runs in the USL fit" in r.render()
    kept = _result(dataclasses.replace(spec, keep_invalid=True), runs, {"address": "x"})
    k3 = next(row for row in kept.summary if row["n"] == 3)
    assert k3["throughput_mean"] == pytest.approx(xs[3] * (1 + 1 / 3) / 2)
    assert k3["throughput_runs"] == 2 and "--keep-invalid" in kept.render()


def test_runs_invalid_for_their_throughput_are_left_out_of_the_fit_and_named() -> None:
    from cachelab.scale.sweep import _result

    spec = ScaleSpec(points=[1, 2, 3, 4, 5, 6, 7], repeats=1, bootstrap=0)
    # X(N) = N / (1 + 0.05 (N - 1)) × 1000: a clean Amdahl curve, but N = 4 stalled (a
    # fraction of its throughput) and N = 5's latencies were correlated.
    xs = {n: 1000 * n / (1 + 0.05 * (n - 1)) for n in spec.points}
    runs = [_fake_run(n, xs[n] * (0.3 if n == 4 else 1.0),
                      throughput_bad="not stationary: 1 stall(s)" if n == 4 else "",
                      latency_bad="latencies not independent" if n == 5 else "")
            for n in spec.points]
    r = _result(spec, runs, {"address": "x", "private": True})
    assert r.fit is not None and r.fit["n"] == [1, 2, 3, 5, 6, 7]
    assert any("left out of the fit, INVALID: N = 4" in note and "stall" in note
               for note in r.limits), r.limits
    assert any("INVALID for their latencies only" in note and "N = 5" in note
               for note in r.limits), r.limits
    kept = _result(dataclasses.replace(spec, keep_invalid=True), runs, {"address": "x"})
    assert kept.fit is not None and kept.fit["n"] == [1, 2, 3, 4, 5, 6, 7]


def test_the_headline_and_table_give_each_n_s_latency_verdict() -> None:
    """Latencies INVALID (client saturated at N >= 5, not independent at N = 1, one of two
    repeats at N = 2) are named per N in the table, in the headline before the sweep's line,
    in the report's findings and in the latency figures' legends; a throughput left out of
    the fit is counted in the headline."""
    from cachelab.scale.section import latency_chart
    from cachelab.scale.sweep import _result

    spec = ScaleSpec(points=[1, 2, 3, 4, 5, 6], repeats=2, bootstrap=0)
    runs = []
    for rep in range(2):
        for n in spec.points:
            bad = {"latency_bad": "latencies not independent"} if n == 1 or (n == 2 and rep) \
                else {"latency_bad": "CLIENT SATURATED", "latency_check": "client"} if n >= 5 \
                else {}
            stalled = {"throughput_bad": "not stationary: 1 stall(s)"} if (n, rep) == (4, 1) \
                else {}
            runs.append({**_fake_run(n, 1000.0 * n / (1 + 0.05 * (n - 1)), **bad, **stalled),
                         "repeat": rep})
    r = _result(spec, runs, {"address": "x"})
    lines = r.render().splitlines()
    # Each INVALID line names its next step after an arrow: a stall, a longer window on a
    # quiet machine; a saturated client, more client machines.
    first, fix = lines[0].split(" → ")
    assert first == ("1 of 12 run(s) INVALID for their throughput, left out of the fit: "
                     "N = 4 (reasons in the notes)")
    assert fix == f"a longer `--window {2 * spec.window:g}` on a quiet machine"
    second, fix = lines[1].split(" → ")
    assert second == ("latencies INVALID (percentiles shown, not certified): client saturated "
                      "at N = 5, 6; not independent at N = 1, 2")
    assert fix.startswith("more client machines (`--ray ray://HEAD:10001`)"), fix
    # The client saturated at the peak (N = 6): the curve is its ceiling, not memcached's.
    assert lines[2].startswith("scaling NOT measurable on this machine: the load client "
                               "saturated at N = 6"), lines[2]
    assert lines[3].startswith("scale sweep: ")
    verdict = {line.split()[0]: line.split("  ")[-1].strip() for line in lines
               if line.split()[:1] in (["1"], ["2"], ["3"], ["4"], ["5"], ["6"])}
    assert verdict == {"1": "not independent", "2": "not independent (1/2)", "3": "VALID",
                       "4": "VALID", "5": "client saturated", "6": "client saturated"}
    names = [row["latency"]["verdict"] for row in r.summary]
    assert names == ["not independent", "not independent (1/2)", "VALID", "VALID",
                     "client saturated", "client saturated"]
    # The figures name the invalid loads (a chart needs histograms: give each row one).
    import cachelab._core as _core

    hist = _core.hist_from_values([1000, 2000, 3000])
    summary = [{**row, "latency": {**row["latency"], "histogram": hist}} for row in r.summary]
    chart = latency_chart(summary, "connections")
    assert chart is not None
    assert [s["name"] for s in chart["series"]][4] == "N = 5 (INVALID: client saturated)"
    assert [s["name"] for s in chart["series"]][2] == "N = 3"
