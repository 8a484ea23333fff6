"""``cachelab load`` side by side with memtier_benchmark, on the same memcached.

    python benches/load_vs_memtier.py --memtier /work/peers/memtier_benchmark/memtier_benchmark

memcached (``-t 1``) is pinned to core 1 and each client, in turn, to core 0 (``taskset``).
Both clients send 100-byte gets over the same prefilled key space (10,000 keys, uniform).
Scenarios (each client runs ``--seconds``):

1. ``server-bound``: 1 thread, 8 connections, pipeline 16 — memcached's core is the bottleneck;
   compare ops/s. cachelab also runs with ``--send-batch N`` (default 8): a connection refills
   its pipeline only once N replies are in, so each write carries N requests.
2. ``pipeline-1``: 1 thread, 4 connections, one request outstanding each; compare client CPU
   per op. The *floor* runs here too (``crates/load/examples/floor.rs``, built with cargo; left
   out without it): a client that does only what one system call per request must — an
   ``epoll_wait`` share, a ``read`` and a ``write`` per request, no histogram, no parsing but
   the reply's ``END`` — so its CPU per op while sending is the least any such client spends
   on this machine, the kernel's share nearly all of it.
3. ``open-loop``: each rate of ``--open-rates`` (default 2,000 and 20,000 requests/s) over 4
   connections (memtier: ``--rate-limiting`` rate/4 per connection); compare p50 (memtier
   measures from the actual send; cachelab reports both). memtier may fall short of the rate,
   so cachelab also runs at the rate memtier reached.

memtier's ops/s is its request count over ``--test-time``: the Ops/sec it reports divides by a
duration it measures off by up to a second (seen: 4-6 s for a 5 s test), which made its
throughput swing by +-20 % between identical runs in earlier records.

Client CPU is the child process's user + system time from ``wait4`` (so cachelab's includes
starting Python, prefilling its keys and deleting them); cachelab's engine threads alone are
reported too, with the time they spent runnable but waiting for a CPU (run-queue wait, from
schedstat), and so is the whole cachelab process's CPU over the sending phase alone ("while
sending": every thread, Python's included, without start-up, prefill and clean-up — the
like-for-like figure for memtier's whole process, whose start-up is negligible and which does
no prefill of its own here). Server CPU per op is memcached's ``rusage_user + rusage_system``
over ``cmd_get``, from ``stats`` deltas: around the whole memtier run, and over cachelab's
measured phase (the engine's own snapshots, so its prefill and clean-up are left out).

Each scenario runs ``--repeats`` times, the two clients back to back (their order alternating
between repeats); the report gives the medians, the median of the per-repeat ratios (each pair
ran within seconds of each other, so this ratio is less exposed to the machine's drift than the
ratio of medians) and every run with the 1-minute load average at its start. On a shared
machine ``--quiet-below L`` waits (up to ``--max-wait`` seconds) for the load average to drop
below ``L`` before each pair. cachelab's CPU outside the sending phase (start-up, imports,
prefill, the verdict, clean-up: the whole process's minus its CPU while sending) and its
verdict's own CPU (``client.verdict_cpu_s``) are given per run. Prints a markdown report;
``--record`` writes it to runs/<day>-load-vs-memtier.md with the raw figures in a .json beside
it (``--out``: to a path of your choice); prints "skipped" and exits 0 when
memtier_benchmark is not found.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import records
from cachelab import _core
from cachelab.servers import PrivateMemcached
from records import memtier_argv

KEYS, SIZE = 10_000, 100


def run_child(argv: list[str]) -> tuple[float, float, str]:
    """Runs ``argv`` pinned to core 0; returns (wall s, CPU s, stdout)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        p = subprocess.Popen(["taskset", "-c", "0", *argv], stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        out.seek(0)
        text = out.read().decode()
        err.seek(0)
        errors = err.read().decode(errors="replace")
    if p.returncode not in (0, 1) or not text.strip():
        raise RuntimeError(f"{argv[0]} exited {p.returncode}: {errors[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, text


def floor_binary() -> Path | None:
    """Builds the floor client (``cargo build --release --example floor``); None without cargo
    or when the build fails (said on stderr)."""
    root = Path(__file__).resolve().parent.parent
    if shutil.which("cargo") is None:
        print("floor skipped: cargo not found", file=sys.stderr)
        return None
    done = subprocess.run(["cargo", "build", "--release", "-q", "-p", "cachelab-load",
                           "--example", "floor"], cwd=root, capture_output=True, text=True)
    path = root / "target" / "release" / "examples" / "floor"
    if done.returncode != 0 or not path.is_file():
        print(f"floor skipped: its build failed: {done.stderr[-500:]}", file=sys.stderr)
        return None
    return path


def floor(path: Path, address: str, seconds: int, conns: int) -> dict:
    """The floor client's run: its CPU per op while sending (its one thread's), and the whole
    process's (its prefill and clean-up of its own keys included)."""
    s_cpu0, s_gets0 = server_cpu(address)
    wall, cpu, text = run_child([str(path), address, str(conns), str(seconds)])
    s_cpu1, s_gets1 = server_cpu(address)
    r = json.loads(text)
    return {"ops_s": r["ops"] / r["seconds"], "ops": r["ops"], "cpu_s": cpu,
            "cpu_us_op": cpu * 1e6 / r["ops"], "sending_cpu_us_op": r["cpu_us_per_op"],
            "server_cpu_us_op": (s_cpu1 - s_cpu0) * 1e6 / max(1, s_gets1 - s_gets0),
            "wall_s": wall}


def server_cpu(address: str) -> tuple[float, int]:
    """memcached's CPU seconds (user + system) and ``cmd_get`` so far."""
    with _core.Client(address) as c:
        st = c.stats()
    return float(st["rusage_user"]) + float(st["rusage_system"]), int(st["cmd_get"])


def memtier(path: str, address: str, seconds: int, conns: int, pipeline: int,
            rate_per_conn: int | None) -> dict:
    with tempfile.TemporaryDirectory() as d:
        js = Path(d) / "m.json"
        argv = memtier_argv(path, ["-P", "memcache_text"], address, conns=conns, pipeline=pipeline,
                            keys=KEYS, seconds=seconds, size=SIZE, json_out=js)
        if rate_per_conn:
            argv.append(f"--rate-limiting={rate_per_conn}")
        s_cpu0, s_gets0 = server_cpu(address)
        wall, cpu, _ = run_child(argv)
        s_cpu1, s_gets1 = server_cpu(address)
        t = json.loads(js.read_text())["ALL STATS"]["Totals"]
    ops = t["Count"]
    # memtier's own Ops/sec divides by its "Total duration", which is off by up to a second
    # (1,001 ms for a 2 s --test-time; 4-6 s for 5 s): its count over the test time instead.
    return {"ops_s": ops / seconds, "reported_ops_s": t["Ops/sec"], "ops": ops, "cpu_s": cpu,
            "cpu_us_op": cpu * 1e6 / ops,
            "server_cpu_us_op": (s_cpu1 - s_cpu0) * 1e6 / max(1, s_gets1 - s_gets0),
            "hits_s": t["Hits/sec"], "p50_us": t["Percentile Latencies"]["p50.00"] * 1000,
            "p99_us": t["Percentile Latencies"]["p99.00"] * 1000, "wall_s": wall}


def cachelab(address: str, seconds: int, conns: int, pipeline: int, rate: int | None,
             busy_poll_us: int = 0, send_batch: int = 1) -> dict:
    with tempfile.TemporaryDirectory() as d:
        argv = [sys.executable, "-m", "cachelab", "load", "--server", address, "--threads", "1",
                "--connections", str(conns), "--pipeline", str(pipeline), "--mix", "get=1",
                "--key-space", str(KEYS), "--value-size", str(SIZE), "--warmup", "0",
                "--duration", str(seconds), "--no-plots", "--out", d, "--format", "json"]
        if rate:
            argv += ["--rate", str(rate), "--max-outstanding", "100"]
        if busy_poll_us:
            argv += ["--busy-poll", str(busy_poll_us)]
        if send_batch > 1:
            argv += ["--send-batch", str(send_batch)]
        wall, cpu, text = run_child(argv)
    r = json.loads(text)
    a = r["all"]
    best = a["corrected"] or a["uncorrected"]
    d = r["server"]["deltas"]
    return {"ops_s": a["throughput"], "ops": a["replies"], "cpu_s": cpu,
            "cpu_us_op": cpu * 1e6 / a["replies"], "engine_cpu_us_op": r["client"]["cpu_us_per_op"],
            "process_cpu_us_op": r["client"]["process_cpu_us_per_op"],
            # the whole process but the sending phase: start-up, imports, prefill, verdict,
            # clean-up
            "outside_us_op": (cpu - r["client"]["process_cpu_s"]) * 1e6 / a["replies"],
            "verdict_cpu_s": r["client"].get("verdict_cpu_s"),
            "wait_us_op": r["client"]["run_queue_wait_us_per_op"],
            "server_cpu_us_op": (d["rusage_user_s"] + d["rusage_system_s"]) * 1e6
            / max(1, d["cmd_get"]),
            "hits": a["hits"], "misses": a["misses"],
            "p50_us": best["percentiles"]["50"] / 1000,
            "p50_uncorrected_us": a["uncorrected"]["percentiles"]["50"] / 1000,
            "p99_us": best["percentiles"]["99"] / 1000, "wall_s": wall,
            "errors": sum(a["errors"].values()),
            "requests_per_write": r["client"].get("requests_per_write")}


def wait_quiet(below: float | None, max_wait: float) -> float:
    """Waits until the 1-minute load average is below ``below``; returns the load then."""
    deadline = time.monotonic() + max_wait
    while below is not None and os.getloadavg()[0] >= below and time.monotonic() < deadline:
        time.sleep(2)
    return os.getloadavg()[0]


def med(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memtier", default="/work/peers/memtier_benchmark/memtier_benchmark")
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quiet-below", type=float, default=None,
                    help="wait for the 1-minute load average to drop below this before each pair")
    ap.add_argument("--max-wait", type=float, default=60.0)
    ap.add_argument("--out", type=Path, help="also write the markdown report here")
    ap.add_argument("--record", action="store_true",
                    help="also write the report to runs/<day>-load-vs-memtier.md and the raw "
                         "figures to a .json beside it")
    ap.add_argument("--scenario", action="append", choices=["server-bound", "pipeline-1",
                                                             "open-loop"],
                    help="run only this scenario (repeatable; default all three)")
    ap.add_argument("--busy-poll", type=int, default=100, metavar="US",
                    help="open-loop scenarios also run cachelab with --busy-poll US "
                         "(default 100; 0: not)")
    ap.add_argument("--open-rates", default="2000,20000", metavar="R[,R...]",
                    help="open-loop target rates, requests/s over 4 connections "
                         "(default 2000,20000)")
    ap.add_argument("--send-batch", type=int, default=8, metavar="N",
                    help="closed-loop scenarios with a pipeline of at least N also run cachelab "
                         "with --send-batch N (default 8; 0 or 1: not)")
    args = ap.parse_args()
    if not (Path(args.memtier).is_file() and os.access(args.memtier, os.X_OK)):
        print(f"skipped: memtier_benchmark not found at {args.memtier}")
        return 0
    if shutil.which("taskset") is None or (os.cpu_count() or 1) < 2:
        print("skipped: needs taskset and two cores")
        return 0
    try:
        rates = [int(r) for r in args.open_rates.split(",")]
        if any(r < 4 for r in rates):
            raise ValueError
    except ValueError:
        ap.error(f"--open-rates must be integers >= 4 separated by commas, not {args.open_rates!r}")
    scenarios = [("server-bound", 8, 16, None), ("pipeline-1", 4, 1, None)]
    scenarios += [(f"open-loop {r}/s", 4, 1, r) for r in rates]
    if args.scenario:
        scenarios = [s for s in scenarios if s[0].split()[0] in args.scenario]
    floor_path = (floor_binary() if any(p == 1 and not r for _, _, p, r in scenarios)
                  else None)
    busy = f"cachelab --busy-poll {args.busy_poll}" if args.busy_poll else None
    batch = f"cachelab --send-batch {args.send_batch}" if args.send_batch > 1 else None

    def tools_of(rate: int | None, pipeline: int) -> list[str]:
        extra = [busy] if busy and rate else []
        if batch and not rate and pipeline >= args.send_batch:
            extra.append(batch)
        return ["memtier", "cachelab", *extra]

    def floored(rate: int | None, pipeline: int) -> bool:
        return floor_path is not None and not rate and pipeline == 1

    runs: dict[str, dict[str, list[dict]]] = {
        n: {t: [] for t in tools_of(rate, pipeline) + ["floor"] * floored(rate, pipeline)}
        for n, _, pipeline, rate in scenarios}
    raw = []
    matched: dict[str, list[dict]] = {n: [] for n, *_ in scenarios}
    load_before = os.getloadavg()
    with PrivateMemcached(threads=1, memory_mb=64, cpus="1") as mc:
        with _core.Client(mc.address) as c:
            for i in range(1, KEYS + 1):
                c.set(f"memtier-{i}", b"x" * SIZE)
        version = mc.version
        for rep in range(args.repeats):
            for name, conns, pipeline, rate in scenarios:
                load = wait_quiet(args.quiet_below, args.max_wait)
                order = (tools_of(rate, pipeline) + ["floor"] * floored(rate, pipeline)
                         )[:: 1 if rep % 2 == 0 else -1]
                for tool in order:
                    for attempt in (1, 2):  # a shared checkout may be mid-rebuild: retry once
                        try:
                            if tool == "floor":
                                assert floor_path is not None
                                r = floor(floor_path, mc.address, args.seconds, conns)
                            elif tool == "memtier":
                                r = memtier(args.memtier, mc.address, args.seconds, conns,
                                            pipeline, rate // conns if rate else None)
                            else:
                                r = cachelab(mc.address, args.seconds, conns, pipeline, rate,
                                             args.busy_poll if tool == busy else 0,
                                             args.send_batch if tool == batch else 1)
                            break
                        except (RuntimeError, ValueError, OSError) as e:
                            if attempt == 2:
                                raise
                            print(f"retrying {tool} {name}: {e}", file=sys.stderr)
                            time.sleep(5)
                    r["load"] = load
                    runs[name][tool].append(r)
                    raw.append((rep + 1, name, tool, r))
                got = int(runs[name]["memtier"][-1]["ops_s"])
                if rate and got < 0.97 * rate:
                    # memtier did not hold the rate: cachelab again at the rate it reached.
                    try:
                        r = cachelab(mc.address, args.seconds, conns, pipeline, got)
                    except (RuntimeError, ValueError, OSError) as e:
                        print(f"skipped the matched-rate run: {e}", file=sys.stderr)
                        continue
                    r["load"], r["rate"] = load, got
                    r["vs"] = runs[name]["memtier"][-1]
                    matched[name].append(r)
                    raw.append((rep + 1, f"{name} at memtier's rate ({got}/s)", "cachelab", r))
        with _core.Client(mc.address) as cl:
            for i in range(1, KEYS + 1):
                cl.delete(f"memtier-{i}")
    load_after = os.getloadavg()
    mt_version = subprocess.run([args.memtier, "--version"], capture_output=True,
                                text=True).stdout.splitlines()[0]
    lines = [
        "# cachelab load vs memtier_benchmark",
        "",
        f"- command: `python benches/load_vs_memtier.py --memtier {args.memtier} "
        f"--seconds {args.seconds} --repeats {args.repeats}"
        + "".join(f" --scenario {n}" for n in args.scenario or [])
        + f" --open-rates {args.open_rates} --busy-poll {args.busy_poll}"
        + f" --send-batch {args.send_batch}"
        + (f" --quiet-below {args.quiet_below}" if args.quiet_below is not None else "") + "`",
        f"- memcached {version}, `-t 1`, pinned to core 1; each client pinned to core 0",
        f"- memtier_benchmark: {mt_version}",
        f"- cachelab commit: {_commit()}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {_cpu()}, "
        f"kernel {platform.release()}",
        f"- load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
        "(the machine is shared with other builds)",
        f"- workload: 100% get, {SIZE} B values, {KEYS} keys uniform, prefilled; "
        f"{args.seconds} s per client per scenario; {args.repeats} repeats, medians below",
        "",
        "| scenario | conns | pipeline | rate | tool | ops/s | client CPU µs/op "
        "| while sending µs/op | engine CPU µs/op | engine run-queue wait µs/op "
        "| server CPU µs/op | p50 µs | p50 uncorrected µs | p99 µs | requests/write |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, conns, pipeline, rate in scenarios:
        r = f"{rate}/s" if rate else "closed"
        m = runs[name]["memtier"]
        lines.append(f"| {name} | {conns} | {pipeline} | {r} | memtier | {med(m, 'ops_s'):.0f} | "
                     f"{med(m, 'cpu_us_op'):.2f} | — | — | — | {med(m, 'server_cpu_us_op'):.2f} | "
                     f"{med(m, 'p50_us'):.1f} | (same) | {med(m, 'p99_us'):.1f} | — |")
        for tool in tools_of(rate, pipeline)[1:]:
            c = runs[name][tool]
            lines.append(
                f"| {name} | {conns} | {pipeline} | {r} | {tool} | {med(c, 'ops_s'):.0f} | "
                f"{med(c, 'cpu_us_op'):.2f} | {med(c, 'process_cpu_us_op'):.2f} | "
                f"{med(c, 'engine_cpu_us_op'):.2f} | "
                f"{med(c, 'wait_us_op'):.2f} | {med(c, 'server_cpu_us_op'):.2f} | "
                f"{med(c, 'p50_us'):.1f} | {med(c, 'p50_uncorrected_us'):.1f} | "
                f"{med(c, 'p99_us'):.1f} | {med(c, 'requests_per_write'):.2f} |")
        if floored(rate, pipeline):
            f = runs[name]["floor"]
            lines.append(
                f"| {name} | {conns} | {pipeline} | {r} | floor | {med(f, 'ops_s'):.0f} | "
                f"{med(f, 'cpu_us_op'):.2f} | {med(f, 'sending_cpu_us_op'):.2f} | — | — | "
                f"{med(f, 'server_cpu_us_op'):.2f} | — | — | — | 1.00 |")
    lines += ["", "Ratios, cachelab / memtier: of the medians, and in brackets the median of the "
              "per-repeat ratios (each pair ran back to back):", ""]

    def ratio(c: list[dict], m: list[dict], key: str, mkey: str | None = None) -> str:
        mkey = mkey or key
        paired = statistics.median(x[key] / y[mkey] for x, y in zip(c, m))
        return f"{med(c, key) / med(m, mkey):.2f} ({paired:.2f})"

    for name, _, pipeline, rate in scenarios:
        m = runs[name]["memtier"]
        for tool in tools_of(rate, pipeline)[1:]:
            c = runs[name][tool]
            parts = [f"ops/s {ratio(c, m, 'ops_s')}",
                     f"client CPU/op {ratio(c, m, 'cpu_us_op')}, while sending "
                     f"{ratio(c, m, 'process_cpu_us_op', 'cpu_us_op')}, engine threads only "
                     f"{ratio(c, m, 'engine_cpu_us_op', 'cpu_us_op')}",
                     f"server CPU/op {ratio(c, m, 'server_cpu_us_op')}"]
            if rate:
                parts.append(f"p50 corrected {ratio(c, m, 'p50_us')}, "
                             f"uncorrected {ratio(c, m, 'p50_uncorrected_us', 'p50_us')}")
            lines.append(f"- {name}, {tool}: " + "; ".join(parts))
        if floored(rate, pipeline):
            f = runs[name]["floor"]
            c = runs[name]["cachelab"]
            lines.append(
                f"- {name}, floor (the least a client sending each request with its own system "
                f"call spends here): CPU/op while sending, floor / memtier's client "
                f"{ratio(f, m, 'sending_cpu_us_op', 'cpu_us_op')}; cachelab / floor: engine "
                f"threads {ratio(c, f, 'engine_cpu_us_op', 'sending_cpu_us_op')}, while sending "
                f"{ratio(c, f, 'process_cpu_us_op', 'sending_cpu_us_op')}, whole process "
                f"{ratio(c, f, 'cpu_us_op', 'sending_cpu_us_op')}")
        same = matched.get(name)
        if same:
            vs = [x["vs"] for x in same]
            lines.append(
                f"- {name}, cachelab at the rate memtier reached (median "
                f"{med(same, 'rate'):.0f}/s, {len(same)} of {len(m)} repeats): "
                f"ops/s {med(same, 'ops_s'):.0f}, "
                f"engine CPU {med(same, 'engine_cpu_us_op'):.2f} µs/op "
                f"({ratio(same, vs, 'engine_cpu_us_op', 'cpu_us_op')}× memtier's client), "
                f"p50 {med(same, 'p50_us'):.1f} µs corrected "
                f"({ratio(same, vs, 'p50_us')}× memtier), "
                f"{med(same, 'p50_uncorrected_us'):.1f} µs uncorrected "
                f"({ratio(same, vs, 'p50_uncorrected_us', 'p50_us')}×)")
    for name, _, pipeline, rate in scenarios:
        for tool in tools_of(rate, pipeline)[1:]:
            c = runs[name][tool]
            verdicts = [x["verdict_cpu_s"] for x in c if x.get("verdict_cpu_s") is not None]
            lines.append(
                f"- {name}, {tool}: outside the sending phase (start-up, imports, prefill, "
                f"verdict, clean-up) {med(c, 'outside_us_op'):.2f} µs/op of the whole "
                f"{med(c, 'cpu_us_op'):.2f}; the verdict "
                + (f"{statistics.median(verdicts):.3f} CPU-s" if verdicts else "not reported"))
    lines += ["", "Every run (load = 1-minute load average before the pair):", "",
              "| repeat | scenario | tool | load | ops/s | client CPU µs/op | engine CPU µs/op "
              "| engine run-queue wait µs/op | outside sending µs/op | verdict CPU s "
              "| server CPU µs/op | p50 µs | p50 uncorrected µs |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rep, name, tool, r in raw:
        if tool == "floor":
            lines.append(f"| {rep} | {name} | floor | {r['load']:.2f} | {r['ops_s']:.0f} | "
                         f"{r['cpu_us_op']:.2f} | {r['sending_cpu_us_op']:.2f} (its thread) | — "
                         f"| — | — | {r['server_cpu_us_op']:.2f} | — | — |")
            continue
        eng = f"{r['engine_cpu_us_op']:.2f}" if "engine_cpu_us_op" in r else "—"
        wait = f"{r['wait_us_op']:.2f}" if "wait_us_op" in r else "—"
        out = f"{r['outside_us_op']:.2f}" if "outside_us_op" in r else "—"
        verdict = f"{r['verdict_cpu_s']:.3f}" if r.get("verdict_cpu_s") is not None else "—"
        unc = f"{r['p50_uncorrected_us']:.1f}" if "p50_uncorrected_us" in r else "(same)"
        lines.append(f"| {rep} | {name} | {tool} | {r['load']:.2f} | {r['ops_s']:.0f} | "
                     f"{r['cpu_us_op']:.2f} | {eng} | {wait} | {out} | {verdict} | "
                     f"{r['server_cpu_us_op']:.2f} | {r['p50_us']:.1f} | {unc} |")
    cl_runs = [r for _, _, tool, r in raw if tool not in ("memtier", "floor")]
    lines += ["", f"cachelab errors: {sum(r['errors'] for r in cl_runs)}; cachelab misses: "
              f"{sum(r['misses'] for r in cl_runs)}"]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
    if args.record:
        day = time.strftime("%Y-%m-%d", time.gmtime())
        md = records.write_record("load-vs-memtier", day, report, {
            "argv": sys.argv[1:], "memcached": version, "memtier": mt_version,
            "commit": _commit(), "load_before": load_before, "load_after": load_after,
            "runs": [{"repeat": rep, "scenario": name, "tool": tool,
                      **{k: v for k, v in r.items() if k != "vs"}}
                     for rep, name, tool, r in raw]})
        print(f"wrote {md}", file=sys.stderr)
    return 0


def _commit() -> str:
    from cachelab import environment

    return environment.commit()


def _cpu() -> str:
    from cachelab import environment

    return str(environment.facts().get("cpu", "unknown"))


if __name__ == "__main__":
    sys.exit(main())
