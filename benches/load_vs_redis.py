"""``cachelab load`` side by side with redis-benchmark (and memtier_benchmark) on the same Redis.

    python benches/load_vs_redis.py --runs 3 --seconds 5 [--memtier PATH]

The method of load_vs_memtier.py, against a private redis-server (``PrivateRedis``: ``--save ''
--appendonly no``, a free loopback port, stopped by PID) pinned to core 1 (``taskset -a -p``,
all its threads) while each client, in turn, runs pinned to core 0. Every client sends 100-byte
``GET``s over 10,000 prefilled keys drawn uniformly:

- cachelab prefills its own keys (its run prefix) and deletes them after;
- redis-benchmark (``-t get -d 100 -r 10000``) asks for ``key:NNNNNNNNNNNN`` (its
  ``key:__rand_int__``, the number zero-padded to 12 digits, 0..9999): this script writes
  those 10,000 keys (redis-py, pipelined ``SET``s) before the runs and ``UNLINK``s them
  after, so its gets hit (``keyspace_hits``/``keyspace_misses`` deltas around each of its runs
  are recorded to show it);
- memtier (``--protocol redis``, ``--key-prefix=memtier-``) likewise over ``memtier-1..10000``.

Scenarios, ``--seconds`` per client (redis-benchmark counts requests, not time: its ``-n`` is
the rate a short calibration run reached times ``--seconds``):

1. ``server-bound``: 8 connections, pipeline 16: Redis's core is the bottleneck; ops/s.
2. ``pipeline-1``: 4 connections, one request outstanding each; client CPU per op.
3. ``stall``: cachelab ``--rate R`` (default 20,000/s over 4 connections) while the server is
   SIGSTOP'd for 1 s mid-run: p99 and max corrected (from the intended send times) against
   uncorrected (from the actual sends). redis-benchmark has no open loop (no rate option: each
   connection sends its next request when the reply is in), so it has no line here; memtier's
   ``--rate-limiting`` would, but it measures from the actual send (uncorrected) only.

Client CPU is the child's user + system time from ``wait4`` (cachelab's includes starting
Python, its prefill and clean-up; its engine threads' own and its whole process's CPU over the
sending phase are given too). Server CPU per op is ``INFO cpu``'s ``used_cpu_user +
used_cpu_sys`` over ``INFO commandstats``' ``cmdstat_get`` calls, deltas around each peer run;
for cachelab the engine's own ``INFO`` snapshots around its measured phase (CPU over
``total_commands_processed``, all gets here). cachelab's CPU outside the sending phase
(start-up, imports, prefill, the verdict, clean-up) per op and its verdict's CPU
(``client.verdict_cpu_s``) are given per run. Each scenario runs ``--runs`` times, the clients'
order alternating; the report gives medians and the median of per-run ratios (cachelab / peer).
On a shared machine ``--quiet-below L`` waits (up to ``--max-wait`` seconds) for the 1-minute
load average to drop below ``L`` before each scenario's runs.
Writes runs/<day>-load-vs-redis.md and .json (``--no-record``: print only). Prints "skipped"
and exits 0 when redis-server or taskset is missing, and each peer is "skipped" when absent.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import redis

import records
from cachelab.resp import RespLogin
from cachelab.servers import PrivateRedis

KEYS, SIZE = 10_000, 100
SCENARIOS = [("server-bound", 8, 16), ("pipeline-1", 4, 1)]


def bench_key(i: int) -> str:
    """redis-benchmark's ``key:__rand_int__`` for the random number ``i`` (``-r``): 12 digits."""
    return f"key:{i:012d}"


def parse_csv(text: str) -> dict[str, dict[str, float]]:
    """redis-benchmark ``--csv`` output: ``{test: {column: value}}`` (``rps``,
    ``p50_latency_ms``, ...). ValueError when no row follows the header."""
    rows = list(csv.reader(io.StringIO(text.strip())))
    if len(rows) < 2 or not rows[0] or rows[0][0] != "test":
        raise ValueError(f"not redis-benchmark CSV: {text[:200]!r}")
    head = rows[0]
    return {r[0]: {k: float(v) for k, v in zip(head[1:], r[1:])} for r in rows[1:] if r}


def write_keys(address: str, keys: list[str], value: bytes | None) -> None:
    """``SET`` each key to ``value`` (``UNLINK`` each when None), pipelined in batches of 1,000
    with redis-py; an error reply raises."""
    host, port = address.rsplit(":", 1)
    with redis.Redis(host=host, port=int(port), socket_timeout=10) as r:
        for i in range(0, len(keys), 1000):
            pipe = r.pipeline(transaction=False)
            for k in keys[i:i + 1000]:
                pipe.set(k, value) if value is not None else pipe.unlink(k)
            pipe.execute()


def server_counters(address: str) -> dict[str, float]:
    with RespLogin().client(address) as c:
        info = dict(c.info("all"))
    get = info.get("cmdstat_get", "calls=0")
    calls = int(dict(kv.split("=") for kv in get.split(","))["calls"])
    return {"cpu_s": float(info["used_cpu_user"]) + float(info["used_cpu_sys"]), "gets": calls,
            "hits": int(info["keyspace_hits"]), "misses": int(info["keyspace_misses"])}


def run_child(argv: list[str]) -> tuple[float, float, str]:
    """Runs ``argv`` pinned to core 0; returns (wall s, CPU s from wait4, stdout)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        p = subprocess.Popen(["taskset", "-c", "0", *argv], stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        out.seek(0)
        text = out.read().decode()
        err.seek(0)
        errors = err.read().decode(errors="replace")
    if code not in (0, 1) or not text.strip():
        raise RuntimeError(f"{argv[0]} exited {code}: {errors[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, text


def peer_run(argv: list[str], address: str, seconds: float | None) -> dict:
    """A peer's run with the server's counters around it; ``ops`` is its gets (the server's
    ``cmdstat_get`` delta), ``ops_s`` over ``seconds`` or, when None, over the peer's own
    time (``rps`` parsed by the caller)."""
    before = server_counters(address)
    wall, cpu, text = run_child(argv)
    after = server_counters(address)
    ops = max(1, int(after["gets"] - before["gets"]))
    return {"text": text, "ops": ops, "cpu_s": cpu, "cpu_us_op": cpu * 1e6 / ops,
            "server_cpu_us_op": (after["cpu_s"] - before["cpu_s"]) * 1e6 / ops,
            "hits": int(after["hits"] - before["hits"]),
            "misses": int(after["misses"] - before["misses"]), "wall_s": wall,
            "ops_s": ops / seconds if seconds else 0.0}


def redis_benchmark(path: str, address: str, conns: int, pipeline: int, n: int) -> dict:
    host, port = address.rsplit(":", 1)
    argv = [path, "-h", host, "-p", port, "-t", "get", "-P", str(pipeline), "-c", str(conns),
            "-n", str(n), "-d", str(SIZE), "-r", str(KEYS), "--csv"]
    r = peer_run(argv, address, None)
    row = parse_csv(r.pop("text"))["GET"]
    r.update(ops_s=row["rps"], p50_us=row["p50_latency_ms"] * 1000,
             p99_us=row["p99_latency_ms"] * 1000, argv=argv)
    return r


def memtier(path: str, address: str, conns: int, pipeline: int, seconds: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        js = Path(d) / "m.json"
        argv = records.memtier_argv(path, ["--protocol", "redis"], address, conns=conns,
                                    pipeline=pipeline, keys=KEYS, seconds=seconds, size=SIZE,
                                    json_out=js)
        r = peer_run(argv, address, seconds)
        t = json.loads(js.read_text())["ALL STATS"]["Totals"]
    r.pop("text")
    r.update(p50_us=t["Percentile Latencies"]["p50.00"] * 1000,
             p99_us=t["Percentile Latencies"]["p99.00"] * 1000, argv=argv)
    return r


def cachelab(address: str, seconds: int, conns: int, pipeline: int, rate: int | None = None,
             stall_pid: int | None = None) -> dict:
    with tempfile.TemporaryDirectory() as d:
        argv = [sys.executable, "-m", "cachelab", "load", "--server", f"redis://{address}",
                "--threads", "1", "--connections", str(conns), "--pipeline", str(pipeline),
                "--mix", "get=1", "--key-space", str(KEYS), "--value-size", str(SIZE),
                "--warmup", "0", "--duration", str(seconds), "--no-plots", "--out", d,
                "--format", "json"]
        if rate:
            argv += ["--rate", str(rate), "--max-outstanding", "100"]
        stall = None
        if stall_pid:
            stall = threading.Thread(target=_stall, args=(stall_pid, address, seconds), daemon=True)
            stall.start()
        wall, cpu, text = run_child(argv)
        if stall:
            stall.join(timeout=30)
    r = json.loads(text)
    a = r["all"]
    dl = r["server"]["deltas"]
    commands = max(1, dl["total_commands_processed"])
    out = {"ops_s": a["throughput"], "ops": a["replies"], "cpu_s": cpu,
           "cpu_us_op": cpu * 1e6 / max(1, a["replies"]),
           "engine_cpu_us_op": r["client"]["cpu_us_per_op"],
           "process_cpu_us_op": r["client"]["process_cpu_us_per_op"],
           # the whole process but the sending phase: start-up, imports, prefill, verdict,
           # clean-up
           "outside_us_op": (cpu - r["client"]["process_cpu_s"]) * 1e6 / max(1, a["replies"]),
           "verdict_cpu_s": r["client"].get("verdict_cpu_s"),
           "server_cpu_us_op": (dl["used_cpu_user_s"] + dl["used_cpu_sys_s"]) * 1e6 / commands,
           "hits": a["hits"], "misses": a["misses"], "errors": sum(a["errors"].values()),
           "wall_s": wall, "argv": argv}
    unc = a["uncorrected"]["percentiles"]
    out.update(p50_us=unc["50"] / 1000, p99_us=unc["99"] / 1000, max_us=unc["max"] / 1000)
    sched = r.get("schedule") or {}
    out.update(backlog_at_end=sched.get("backlog_at_end"), late=sched.get("late"),
               verdict=r["validity"]["verdict"], stalls=r.get("stalls"))
    if a["corrected"]:
        cor = a["corrected"]["percentiles"]
        out.update(corrected_p50_us=cor["50"] / 1000, corrected_p99_us=cor["99"] / 1000,
                   corrected_max_us=cor["max"] / 1000)
    return out


def _stall(pid: int, address: str, seconds: int) -> None:
    """Waits for the run's gets to begin (``cmdstat_get`` moving: the prefill is SETs), then
    SIGSTOPs ``pid`` for 1 s from ``seconds / 2`` into the run, and SIGCONTs it whatever
    happens. Gives up after 30 s without gets."""
    start = server_counters(address)["gets"]
    deadline = time.monotonic() + 30
    while server_counters(address)["gets"] == start:
        if time.monotonic() > deadline:
            return
        time.sleep(0.02)
    time.sleep(seconds / 2)
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(1.0)
    finally:
        os.kill(pid, signal.SIGCONT)


def _shown(argv: list[str]) -> list[str]:
    """A command as the record shows it: python's path as ``python``, a temporary ``--out``
    directory as ``TMPDIR``."""
    out = ["python" if a == sys.executable else a for a in argv]
    return [("TMPDIR" if i and out[i - 1] == "--out" else a) for i, a in enumerate(out)]


def med(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def wait_quiet(below: float | None, max_wait: float) -> float:
    """Waits until the 1-minute load average is below ``below`` (at most ``max_wait`` s);
    returns the load average then."""
    deadline = time.monotonic() + max_wait
    while below is not None and os.getloadavg()[0] >= below and time.monotonic() < deadline:
        time.sleep(2)
    return os.getloadavg()[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--redis-benchmark", default=shutil.which("redis-benchmark"), metavar="PATH",
                    help="redis-benchmark (default: found on PATH; skipped when absent)")
    ap.add_argument("--memtier", metavar="PATH",
                    help="memtier_benchmark, run with --protocol redis (skipped when not given)")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3, help="alternations (default 3); medians")
    ap.add_argument("--stall-rate", type=int, default=20_000, metavar="R",
                    help="the stall scenario's open-loop rate, requests/s (default 20000)")
    ap.add_argument("--quiet-below", type=float, default=None, metavar="L",
                    help="wait for the 1-minute load average to drop below L before each "
                         "scenario's runs")
    ap.add_argument("--max-wait", type=float, default=60.0, metavar="S",
                    help="the longest --quiet-below waits, seconds (default 60)")
    ap.add_argument("--no-record", action="store_true", help="print only, write no record")
    args = ap.parse_args()
    if shutil.which("taskset") is None or (os.cpu_count() or 1) < 2:
        print("skipped: needs taskset and two cores")
        return 0
    if shutil.which("redis-server") is None:
        print("skipped: redis-server not installed")
        return 0
    peers: dict[str, str] = {}
    notes = []
    for name, path in (("redis-benchmark", args.redis_benchmark), ("memtier", args.memtier)):
        if path and Path(path).is_file() and os.access(path, os.X_OK):
            peers[name] = path
        else:
            notes.append(f"{name}: skipped ({'not found at ' + path if path else 'not given'})")
    tools = ["cachelab", *peers]
    runs: dict[str, dict[str, list[dict]]] = {s: {t: [] for t in tools} for s, *_ in SCENARIOS}
    stalls: list[dict] = []
    raw: list[dict] = []
    load_before = os.getloadavg()
    with PrivateRedis(memory_mb=64) as srv:
        subprocess.run(["taskset", "-a", "-p", "-c", "1", str(srv.pid)], check=True,
                       capture_output=True)
        addr = srv.address
        value = b"x" * SIZE
        keys = [bench_key(i) for i in range(KEYS)] + [f"memtier-{i}" for i in range(1, KEYS + 1)]
        write_keys(addr, keys, value)
        with RespLogin().client(addr) as c:
            version = dict(c.info("server"))["redis_version"]
        # redis-benchmark counts requests: calibrate -n to about --seconds per scenario.
        n_of = {}
        if "redis-benchmark" in peers:
            for name, conns, pipeline in SCENARIOS:
                probe = redis_benchmark(peers["redis-benchmark"], addr, conns, pipeline,
                                        20_000 if pipeline == 1 else 200_000)
                n_of[name] = max(10_000, int(probe["ops_s"] * args.seconds))
        try:
            for rep in range(args.runs):
                for name, conns, pipeline in SCENARIOS:
                    load = wait_quiet(args.quiet_below, args.max_wait)
                    for tool in tools[:: 1 if rep % 2 == 0 else -1]:
                        if tool == "cachelab":
                            r = cachelab(addr, args.seconds, conns, pipeline)
                        elif tool == "redis-benchmark":
                            r = redis_benchmark(peers[tool], addr, conns, pipeline, n_of[name])
                        else:
                            r = memtier(peers[tool], addr, conns, pipeline, args.seconds)
                        r["load"] = load
                        runs[name][tool].append(r)
                        raw.append({"run": rep + 1, "scenario": name, "tool": tool, **r})
                load = wait_quiet(args.quiet_below, args.max_wait)
                r = cachelab(addr, args.seconds + 2, 4, 1, args.stall_rate, srv.pid)
                r["load"] = load
                stalls.append(r)
                raw.append({"run": rep + 1, "scenario": "stall", "tool": "cachelab", **r})
        finally:
            write_keys(addr, keys, None)
    load_after = os.getloadavg()
    versions = {"redis-server": version}
    for name, path in peers.items():
        versions[name] = records.tool_version([path, "--version"])
    return report(args, peers, notes, versions, runs, stalls, raw, load_before, load_after)


def report(args: argparse.Namespace, peers: dict[str, str], notes: list[str],
           versions: dict[str, str], runs: dict[str, dict[str, list[dict]]],
           stalls: list[dict], raw: list[dict], load_before: tuple, load_after: tuple) -> int:
    argv = [f"--runs {args.runs}", f"--seconds {args.seconds}",
            f"--stall-rate {args.stall_rate}"]
    argv += [f"--redis-benchmark {peers['redis-benchmark']}"] if "redis-benchmark" in peers else []
    argv += [f"--memtier {peers['memtier']}"] if "memtier" in peers else []
    argv += [f"--quiet-below {args.quiet_below}"] if args.quiet_below is not None else []
    facts = [f"redis-server {versions['redis-server']} (`--save '' --appendonly no`, private, "
             "pinned to core 1 with `taskset -a -p -c 1`); each client pinned to core 0",
             *(f"{k}: {v}" for k, v in versions.items() if k != "redis-server"), *notes,
             f"machine: {platform.machine()}, kernel {platform.release()}; load average before "
             f"{load_before[0]:.2f}, after {load_after[0]:.2f}",
             f"workload: 100% GET, {SIZE} B values, {KEYS} keys uniform, prefilled (cachelab "
             "its own prefix; redis-benchmark's `key:%012d` 0..9999 and memtier's `memtier-N` "
             f"written by this script with redis-py's pipelined SETs); {args.seconds} s per "
             f"client per scenario; {args.runs} alternations, medians below"]
    lines, _ = records.header("cachelab load vs redis-benchmark on Redis", "load_vs_redis.py",
                              argv, facts)
    head = ["scenario", "tool", "ops/s", "client CPU µs/op", "while sending µs/op",
            "engine CPU µs/op", "server CPU µs/op", "p50 µs", "p99 µs", "hits", "misses"]
    rows = []
    for name, conns, pipeline in SCENARIOS:
        for tool, rs in runs[name].items():
            cl = tool == "cachelab"
            rows.append([f"{name} ({conns}×P{pipeline})", tool, f"{med(rs, 'ops_s'):.0f}",
                         f"{med(rs, 'cpu_us_op'):.2f}",
                         f"{med(rs, 'process_cpu_us_op'):.2f}" if cl else "—",
                         f"{med(rs, 'engine_cpu_us_op'):.2f}" if cl else "—",
                         f"{med(rs, 'server_cpu_us_op'):.2f}", f"{med(rs, 'p50_us'):.1f}",
                         f"{med(rs, 'p99_us'):.1f}", f"{sum(r['hits'] for r in rs)}",
                         f"{sum(r['misses'] for r in rs)}"])
    lines += records.markdown_table(head, rows)
    lines += ["", "Ratios cachelab / peer: of the medians (in brackets the median of the per-run "
              "ratios, each pair back to back):", ""]
    for name, *_ in SCENARIOS:
        c = runs[name]["cachelab"]
        for peer in peers:
            p = runs[name][peer]
            parts = []
            for label, key, pkey in (("ops/s", "ops_s", "ops_s"),
                                     ("client CPU/op", "cpu_us_op", "cpu_us_op"),
                                     ("while sending", "process_cpu_us_op", "cpu_us_op"),
                                     ("engine threads only", "engine_cpu_us_op", "cpu_us_op"),
                                     ("server CPU/op", "server_cpu_us_op", "server_cpu_us_op")):
                paired = statistics.median(x[key] / y[pkey] for x, y in zip(c, p))
                parts.append(f"{label} {med(c, key) / med(p, pkey):.2f} ({paired:.2f})")
            lines.append(f"- {name}, cachelab / {peer}: " + "; ".join(parts))
        verdicts = [x["verdict_cpu_s"] for x in c if x.get("verdict_cpu_s") is not None]
        lines.append(f"- {name}, cachelab outside the sending phase (start-up, imports, "
                     f"prefill, verdict, clean-up): {med(c, 'outside_us_op'):.2f} µs/op of the "
                     f"whole {med(c, 'cpu_us_op'):.2f}; the verdict "
                     + (f"{statistics.median(verdicts):.3f} CPU-s" if verdicts
                        else "not reported"))
    lines += ["", f"Open-loop truth under a stall: cachelab `--rate {args.stall_rate}` over 4 "
              f"connections for {args.seconds + 2} s, redis-server SIGSTOP'd for 1 s from "
              f"{(args.seconds + 2) / 2:.1f} s after its first get (p99 and max, ms). "
              "redis-benchmark has no open loop (no rate option: each connection sends when "
              "its reply is in, so a stall only pauses it, and the requests it would have sent "
              "are never counted — coordinated omission by design); memtier's "
              "`--rate-limiting` paces, but measures from the actual send only:", ""]
    head = ["run", "load", "ops/s", "corrected p99", "corrected max", "uncorrected p99",
            "uncorrected max", "uncorrected p50", "stall seen (s, slow replies)", "backlog at end",
            "verdict", "errors"]
    rows = [[str(i + 1), f"{r['load']:.2f}", f"{r['ops_s']:.0f}",
             f"{r.get('corrected_p99_us', float('nan')) / 1000:.1f}",
             f"{r.get('corrected_max_us', float('nan')) / 1000:.1f}",
             f"{r['p99_us'] / 1000:.1f}", f"{r['max_us'] / 1000:.1f}", f"{r['p50_us'] / 1000:.2f}",
             "; ".join(f"{x['start_s']:.1f}-{x['end_s']:.1f}, {x['slow_replies']}"
                       for x in r["stalls"] or []) or "none",
             str(r["backlog_at_end"]), r["verdict"], str(r["errors"])]
            for i, r in enumerate(stalls)]
    lines += records.markdown_table(head, rows)
    lines += ["", "Every run (load = 1-minute load average at the start of the scenario):", ""]
    head = ["run", "scenario", "tool", "load", "ops/s", "client CPU µs/op",
            "outside sending µs/op", "verdict CPU s", "server CPU µs/op", "p50 µs", "p99 µs",
            "wall s"]
    lines += records.markdown_table(head, [
        [str(r["run"]), r["scenario"], r["tool"], f"{r['load']:.2f}", f"{r['ops_s']:.0f}",
         f"{r['cpu_us_op']:.2f}",
         f"{r['outside_us_op']:.2f}" if "outside_us_op" in r else "—",
         f"{r['verdict_cpu_s']:.3f}" if r.get("verdict_cpu_s") is not None else "—",
         f"{r['server_cpu_us_op']:.2f}", f"{r['p50_us']:.1f}",
         f"{r['p99_us']:.1f}", f"{r['wall_s']:.1f}"] for r in raw])
    lines += ["", "Commands: " + "; ".join(
        sorted({"`" + " ".join(_shown(r["argv"])) + "`" for r in raw if r["run"] == 1}))]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_record:
        day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        md = records.write_record("load-vs-redis", day, text,
                                  {"versions": versions, "runs": raw})
        print(f"wrote {md}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
