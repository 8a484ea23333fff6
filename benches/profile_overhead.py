"""How much does cachelab's measuring add to what it measures?

Two benchmarks, one script (``make bench`` runs the first):

**Overhead** (the default). Side by side in one run, against one memcached:

* the *loopback floor* — cachelab's floor cell: a minimal request/response (``mn``, or
  ``version``) on the measuring connection, through cachelab's own client, timed right after
  an untimed one as the get is timed right after its set. Since issue 31 it is not a raw
  socket: cachelab/floor is what a get costs above a no-op on the same path (client
  included), not the client's overhead; that one is cachelab/pymemcache (and, on the machine
  it was measured on, cachelab's client and a raw blocking socket timed an ``mn`` within
  1–2 µs of each other);
* *cachelab* — the p50 of cachelab's get of a 100 B value (``cachelab.profile`` with
  ``sizes=(100,)``, no multi-get); the floor cell comes from the same call, interleaved with
  the gets sample by sample;
* *pymemcache* — the p50 of ``pymemcache.client.base.Client.get`` (``no_delay=True``,
  timeouts set, replies awaited) doing the same sample: write a fresh random 100 B value under
  a new key with a unique per-run prefix (untimed), time ``client.get(key)`` with
  ``time.perf_counter_ns()``, check the bytes, delete the key (untimed).

The three are measured in many short rounds (default 31 rounds of 1,000 samples after 100
warm-up, about a second each). A round is a sandwich: pymemcache's warm-up and first half,
then one ``cachelab.profile`` call (floor and get interleaved sample by sample), then
pymemcache's second half on the same connection — so a drift within the round lands on both
sides alike. The floor and cachelab's get share every moment, so their ratio is robust; the
cachelab/pymemcache ratio compares numbers taken within about a second. On the 2-core VM
this was written on, the pinned loopback round trip sometimes jumps for seconds between
regimes (about 100 µs and about 400 µs): short rounds keep each round mostly in one regime,
and the headline is the median over rounds of the per-round ratios (the ratio of the medians
is printed too). Goals, from the project's issue: cachelab's p50 <= pymemcache's, and <= 1.5x
the floor.

Unless ``--server`` is given, a private memcached is started pinned to ``--server-cpus``
(default core 1, ``-t 1``) and this process — and every thread it starts later, including
cachelab's Rust measuring threads, which inherit the affinity — is pinned to
``--client-cpus`` (default core 0), so client and server never fight for one core.

cachelab's percentiles are read from its HdrHistogram (3 significant digits); pymemcache's
are exact (nearest rank over the kept samples). Warm-up samples are run and discarded by both.

**Default run** (``--default-run``). Times the full default ``cachelab profile`` (7 value
sizes, 5 key counts, 10,000 samples per cell, 200 warm-up, plots written) exactly as a user
runs it, against the private memcached the CLI starts itself: wall-clock of
``cachelab profile --out TMPDIR --format json`` in a subprocess, and the run's own
``run.elapsed_s`` (the measuring part). Goal: under 60 s (median of ``--rounds`` runs).
Unpinned by default; ``--cli-cpus 0`` runs the CLI under ``taskset -c 0``, and the memcached
it starts inherits that, so client and server share one core.

``--record`` writes a dated markdown record (command, date, commit, versions, machine,
pinning, raw per-round numbers, medians) and the raw JSON next to it in ``benches/runs/``.

Exit status: 0 every goal met; 1 a goal missed or the measurement found problems (errors,
mismatches, misses, keys left behind, a failed run); 2 bad usage or no measurement possible.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import secrets
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import cachelab
from cachelab import environment
from cachelab.errors import CachelabError
from cachelab.profile import ProfileSpec
from cachelab.servers import PrivateMemcached
from records import markdown_table, record_base

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs"

VALUE_SIZE = 100  # bytes: the get the issue asks about
PERCENTILES = (50.0, 90.0, 99.0)
FLOOR_GOAL = 1.5  # cachelab p50 <= 1.5x the floor
PYMEMCACHE_GOAL = 1.0  # cachelab p50 <= pymemcache p50
DEFAULT_RUN_GOAL_S = 60.0

DEFAULTS = {
    "rounds": 31,
    "samples": 1_000,
    "warmup": 100,
    "default_rounds": 3,
}


# -- small helpers ---------------------------------------------------------------------------


def nearest_rank(sorted_ns: list[int], p: float) -> int:
    """The p-th percentile of already sorted samples (nearest rank)."""
    if not sorted_ns:
        return 0
    rank = max(1, -(-len(sorted_ns) * p // 100))  # ceil without floats drifting
    return sorted_ns[int(rank) - 1]


def us(ns: float) -> str:
    return f"{ns / 1000:.1f}"


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def command_line() -> str:
    """The command as typed, relative to the repository when it can be."""
    argv = list(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    repo = HERE.parent
    out = []
    for a in argv:
        p = Path(a)
        if p.is_absolute() and p.exists():
            with contextlib.suppress(ValueError):
                a = str(p.relative_to(repo))
        out.append(a)
    return shlex.join(out)


def pymemcache_server(address: str) -> tuple[str, int] | str:
    """pymemcache's form of a cachelab address: ``(host, port)`` or a Unix socket path."""
    if address.startswith("unix:"):
        return address[len("unix:") :]
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"--server wants HOST:PORT or unix:PATH, not {address!r}")
    return (host.strip("[]"), int(port))


def pymemcache_version() -> str:
    try:
        import pymemcache

        return str(pymemcache.__version__)
    except ImportError:
        return "not installed"


def machine_facts() -> dict[str, Any]:
    facts = dict(environment.facts())
    facts["pymemcache_version"] = pymemcache_version()
    facts["python_implementation"] = platform.python_implementation()
    return facts


# -- the overhead benchmark ------------------------------------------------------------------


def measure_cachelab(address: str, samples: int, warmup: int) -> dict[str, Any]:
    """One cachelab.profile call: the floor cell and the 100 B get cell, interleaved."""
    spec = ProfileSpec(sizes=(VALUE_SIZE,), key_counts=(), samples=samples, warmup=warmup)
    t0 = time.perf_counter()
    result = cachelab.profile.profile(spec, server=address)
    elapsed = time.perf_counter() - t0
    floor = result.floor
    (get,) = [c for c in result.cells_of("get") if c.value_size == VALUE_SIZE]
    if floor is None:
        raise SystemExit("profile_overhead: the profile has no floor cell")
    problems = dict(result.problems())
    return {
        "floor_ns": dict(zip(map(str, PERCENTILES), floor.at(list(PERCENTILES)))),
        "floor_samples": floor.samples,
        "floor_command": result.client.get("floor_command"),
        "get_ns": dict(zip(map(str, PERCENTILES), get.at(list(PERCENTILES)))),
        "get_samples": get.samples,
        "problems": problems,
        "server_version": result.server.get("version"),
        "elapsed_s": round(elapsed, 3),
    }


class PymemcacheGets:
    """cachelab's get sample, through pymemcache: set (untimed), timed get, check, delete.

    One connection for the whole round, so the halves before and after cachelab's share it.
    """

    def __init__(self, address: str) -> None:
        from pymemcache.client.base import Client

        self.client = Client(
            pymemcache_server(address),
            connect_timeout=2.0,
            timeout=1.0,
            no_delay=True,
            default_noreply=False,  # wait for every reply, as cachelab does
        )
        self.prefix = f"cachelab-bench:{secrets.token_hex(6)}"
        self.kept: list[int] = []
        self.seq = 0
        self.errors = self.mismatches = self.misses = 0
        self.leftovers: list[str] = []
        self.elapsed = 0.0

    def run(self, n: int, *, keep: bool) -> None:
        from pymemcache.exceptions import MemcacheError

        client, clock = self.client, time.perf_counter_ns
        t0 = time.perf_counter()
        for _ in range(n):
            self.seq += 1
            key = f"{self.prefix}:g{VALUE_SIZE}:{self.seq}"
            value = os.urandom(VALUE_SIZE)
            try:
                if not client.set(key, value):
                    self.errors += 1
                    continue
                start = clock()
                got = client.get(key)
                took = clock() - start
                if got is None:
                    self.misses += 1
                else:
                    if keep:
                        self.kept.append(took)
                    if got != value:
                        self.mismatches += 1
                if not client.delete(key):
                    self.leftovers.append(key)
            except (OSError, MemcacheError):  # counted, like cachelab's errors; reconnects
                self.errors += 1
                self.leftovers.append(key)
                client.close()
        self.elapsed += time.perf_counter() - t0

    def finish(self) -> dict[str, Any]:
        """Retries deleting what may be left, closes, and summarizes."""
        from pymemcache.exceptions import MemcacheError

        try:
            for key in self.leftovers[:]:
                self.client.delete(key)
                if self.client.get(key) is None:
                    self.leftovers.remove(key)
        except (OSError, MemcacheError):
            pass  # what is left stays counted in leftover_keys
        finally:
            self.client.close()
        kept = sorted(self.kept)
        counts = {
            "errors": self.errors,
            "mismatches": self.mismatches,
            "misses": self.misses,
            "leftover_keys": len(self.leftovers),
        }
        return {
            "get_ns": {str(p): nearest_rank(kept, p) for p in PERCENTILES},
            "get_samples": len(kept),
            "problems": {k: v for k, v in counts.items() if v},
            "elapsed_s": round(self.elapsed, 3),
        }


def overhead_round(index: int, address: str, samples: int, warmup: int) -> dict[str, Any]:
    """pymemcache's first half, cachelab (floor and get), pymemcache's second half."""
    out: dict[str, Any] = {"round": index + 1, "load_before": loadavg()}
    pm = PymemcacheGets(address)
    try:
        pm.run(warmup, keep=False)
        pm.run(samples // 2, keep=True)
        out["cachelab"] = measure_cachelab(address, samples, warmup)
        pm.run(samples - samples // 2, keep=True)
    finally:
        out["pymemcache"] = pm.finish()
    out["load_after"] = loadavg()
    floor = out["cachelab"]["floor_ns"]["50.0"]
    cl = out["cachelab"]["get_ns"]["50.0"]
    pmp50 = out["pymemcache"]["get_ns"]["50.0"]
    out["p50_ns"] = {"floor": floor, "cachelab": cl, "pymemcache": pmp50}
    out["ratios"] = {"cachelab/floor": ratio(cl, floor), "cachelab/pymemcache": ratio(cl, pmp50)}
    return out


def pin_client(cpus: set[int] | None) -> list[int]:
    if cpus:
        os.sched_setaffinity(0, cpus)
    return sorted(os.sched_getaffinity(0))


def run_overhead(args: argparse.Namespace) -> dict[str, Any]:
    started = utc_now()
    t0 = time.perf_counter()
    client_cpus = pin_client(args.client_cpus)
    server: dict[str, Any]
    mc: PrivateMemcached | None = None
    if args.server:
        address = args.server
        server = {"address": address, "private": False, "pinning": "unknown (external server)"}
    else:
        mc = PrivateMemcached(threads=args.server_threads, cpus=args.server_cpus).start()
        address = mc.address
        server = {
            "address": address,
            "private": True,
            "argv": mc.argv,
            "threads": args.server_threads,
            "pinning": f"taskset -c {args.server_cpus}" if args.server_cpus else "none",
        }
    rounds: list[dict[str, Any]] = []
    try:
        print(
            f"profile overhead: {args.rounds} rounds x {args.samples} samples "
            f"(+{args.warmup} warm-up) of a {VALUE_SIZE} B get at {address}; "
            f"client on CPUs {client_cpus}, server {server['pinning']}",
            flush=True,
        )
        for i in range(args.rounds):
            r = overhead_round(i, address, args.samples, args.warmup)
            rounds.append(r)
            p = r["p50_ns"]
            print(
                f"  round {i + 1}/{args.rounds}: floor {us(p['floor'])} µs, "
                f"cachelab {us(p['cachelab'])} µs, pymemcache {us(p['pymemcache'])} µs "
                f"(load {r['load_after'][0] if r['load_after'] else '?'})",
                flush=True,
            )
    finally:
        if mc is not None:
            mc.stop()
    server["version"] = rounds[0]["cachelab"]["server_version"] if rounds else None
    return {
        "benchmark": "profile-overhead",
        "started": started.isoformat().replace("+00:00", "Z"),
        "elapsed_s": round(time.perf_counter() - t0, 1),
        "command": command_line(),
        "settings": {
            "rounds": args.rounds,
            "samples": args.samples,
            "warmup": args.warmup,
            "value_size": VALUE_SIZE,
        },
        "pinning": {"client_cpus": client_cpus, "server": server["pinning"]},
        "server": server,
        "machine": machine_facts(),
        "rounds": rounds,
        "summary": summarize_overhead(rounds),
    }


def summarize_overhead(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    med = {
        k: statistics.median(r["p50_ns"][k] for r in rounds)
        for k in ("floor", "cachelab", "pymemcache")
    }
    per_round = {
        k: statistics.median(r["ratios"][k] for r in rounds)
        for k in ("cachelab/floor", "cachelab/pymemcache")
    }
    problems: dict[str, int] = {}
    for r in rounds:
        for who in ("cachelab", "pymemcache"):
            for k, n in r[who]["problems"].items():
                problems[f"{who} {k}"] = problems.get(f"{who} {k}", 0) + n
    goals = {
        "cachelab p50 <= pymemcache p50": {
            "value": per_round["cachelab/pymemcache"],
            "limit": PYMEMCACHE_GOAL,
        },
        f"cachelab p50 <= {FLOOR_GOAL}x floor p50": {
            "value": per_round["cachelab/floor"],
            "limit": FLOOR_GOAL,
        },
    }
    for g in goals.values():
        g["pass"] = g["value"] <= g["limit"]
    return {
        "median_p50_ns": med,
        "median_of_round_ratios": per_round,
        "ratio_of_medians": {
            "cachelab/floor": ratio(med["cachelab"], med["floor"]),
            "cachelab/pymemcache": ratio(med["cachelab"], med["pymemcache"]),
        },
        "goals": goals,
        "problems": problems,
        "pass": all(g["pass"] for g in goals.values()) and not problems,
    }


def overhead_table(result: dict[str, Any]) -> list[str]:
    """One row per round and a median row, as a markdown table (also fine on a terminal)."""
    s = result["summary"]
    head = [
        "round",
        "floor p50 µs",
        "cachelab p50 µs",
        "pymemcache p50 µs",
        "cachelab/floor",
        "cachelab/pymemcache",
        "load",
    ]
    rows = [
        [
            str(r["round"]),
            us(r["p50_ns"]["floor"]),
            us(r["p50_ns"]["cachelab"]),
            us(r["p50_ns"]["pymemcache"]),
            f"{r['ratios']['cachelab/floor']:.2f}x",
            f"{r['ratios']['cachelab/pymemcache']:.2f}x",
            str(r["load_after"][0]) if r["load_after"] else "?",
        ]
        for r in result["rounds"]
    ]
    med, rr = s["median_p50_ns"], s["median_of_round_ratios"]
    rows.append(
        [
            "median",
            f"{us(med['floor'])}",
            f"{us(med['cachelab'])}",
            f"{us(med['pymemcache'])}",
            f"{rr['cachelab/floor']:.2f}x",
            f"{rr['cachelab/pymemcache']:.2f}x",
            "",
        ]
    )
    return markdown_table(head, rows)


def goals_table(goals: dict[str, dict[str, Any]], unit: str = "x") -> list[str]:
    rows = [
        [name, f"{g['value']:.2f}{unit}", f"{g['limit']:.2f}{unit}", verdict(g["pass"])]
        for name, g in goals.items()
    ]
    return markdown_table(["goal", "measured", "limit", "result"], rows)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"



def print_overhead(result: dict[str, Any]) -> None:
    s = result["summary"]
    print()
    print("\n".join(overhead_table(result)))
    print()
    rom = s["ratio_of_medians"]
    print(
        f"ratio of the medians: cachelab/floor {rom['cachelab/floor']:.2f}x, "
        f"cachelab/pymemcache {rom['cachelab/pymemcache']:.2f}x"
    )
    print("goals (median of the per-round ratios):")
    print("\n".join(goals_table(s["goals"])))
    if s["problems"]:
        print("measurement problems: " + ", ".join(f"{k} {n}" for k, n in s["problems"].items()))
    print(f"overall: {'PASS' if s['pass'] else 'FAIL'} in {result['elapsed_s']} s")


# -- the default-run benchmark ---------------------------------------------------------------


def cachelab_command() -> str:
    exe = Path(sys.executable).parent / "cachelab"
    return str(exe) if exe.exists() else "cachelab"


def run_default(args: argparse.Namespace) -> dict[str, Any]:
    started = utc_now()
    t0 = time.perf_counter()
    runs: list[dict[str, Any]] = []
    base = [cachelab_command(), "profile"]
    if args.server:
        base += ["--server", args.server]
    shown = shlex.join(["cachelab", *base[1:], "--out", "TMPDIR", "--format", "json"])
    if args.cli_cpus:
        # The CLI starts its memcached without taskset, so the server inherits these CPUs too.
        base = ["taskset", "-c", args.cli_cpus, *base]
        shown = f"taskset -c {args.cli_cpus} {shown}"
        pinning = f"CLI and its private memcached: taskset -c {args.cli_cpus}"
    else:
        pinning = "none: the CLI's own private memcached (-t 4), both unpinned"
    print(f"default run: {args.rounds} x `{shown}` ({pinning})", flush=True)
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="cachelab-bench-") as tmp:
            cmd = [*base, "--out", tmp, "--format", "json"]
            load_before = loadavg()
            w0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            wall = time.perf_counter() - w0
            run: dict[str, Any] = {
                "round": i + 1,
                "exit_code": proc.returncode,
                "wall_s": round(wall, 2),
                "load_before": load_before,
                "load_after": loadavg(),
                "files": sorted(p.name for p in Path(tmp).iterdir()),
            }
        try:
            prof = json.loads(proc.stdout)
        except json.JSONDecodeError:
            run["error"] = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        else:
            cells = prof["cells"]
            p50 = {(c["op"], c["value_size"]): c["percentiles"].get("50") for c in cells}
            run.update(
                floor_p50_ns=p50.get(("floor", 0)),
                get_100b_p50_ns=p50.get(("get", VALUE_SIZE)),
                elapsed_s=prof["run"]["elapsed_s"],
                cells={
                    op: sum(1 for c in cells if c["op"] == op)
                    for op in ("floor", "get", "set", "multiget")
                },
                samples_per_cell=sorted({c["samples"] for c in cells}),
                warmup=prof["client"]["warmup"],
                server_version=prof["server"].get("version"),
                server_argv=prof["server"].get("argv"),
                problems={
                    k: v
                    for k, v in {
                        "errors": sum(sum(c["errors"].values()) for c in cells),
                        "mismatches": sum(c["mismatches"] for c in cells),
                        "misses": sum(c["misses"] for c in cells),
                        "leftover_keys": prof["run"].get("leftover_keys", 0),
                    }.items()
                    if v
                },
            )
        runs.append(run)
        print(
            f"  run {i + 1}/{args.rounds}: wall {run['wall_s']:.1f} s, measuring "
            f"{run.get('elapsed_s', float('nan')):.1f} s, exit {run['exit_code']} "
            f"(load {run['load_after'][0] if run['load_after'] else '?'})"
            + (f"; {run['error']}" if "error" in run else ""),
            flush=True,
        )
    ok = [r for r in runs if "elapsed_s" in r]
    walls = [r["wall_s"] for r in runs]
    median_wall = statistics.median(walls)
    problems = [
        r["round"] for r in runs if r["exit_code"] != 0 or "error" in r or r.get("problems")
    ]
    goals = {
        f"default run wall-clock (median) < {DEFAULT_RUN_GOAL_S:.0f} s": {
            "value": median_wall,
            "limit": DEFAULT_RUN_GOAL_S,
            "pass": median_wall < DEFAULT_RUN_GOAL_S,
        },
    }
    return {
        "benchmark": "default-run",
        "started": started.isoformat().replace("+00:00", "Z"),
        "elapsed_s": round(time.perf_counter() - t0, 1),
        "command": command_line(),
        "timed_command": shown,
        "pinning": {
            "client_cpus": f"taskset -c {args.cli_cpus}" if args.cli_cpus else "unpinned",
            "server": pinning,
        },
        "machine": machine_facts(),
        "rounds": runs,
        "summary": {
            "median_wall_s": median_wall,
            "max_wall_s": max(walls),
            "median_measuring_s": statistics.median(r["elapsed_s"] for r in ok) if ok else None,
            "all_under_goal": all(w < DEFAULT_RUN_GOAL_S for w in walls),
            "runs_with_problems": problems,
            "goals": goals,
            "pass": goals[next(iter(goals))]["pass"] and not problems,
        },
    }


def default_table(result: dict[str, Any]) -> list[str]:
    runs = result["rounds"]
    s = result["summary"]

    def fmt(x: Any) -> str:
        return f"{x:.1f}" if isinstance(x, (int, float)) else "—"

    head = ["", *(f"run {r['round']}" for r in runs), "median"]
    rows = [
        ["wall-clock (s)", *(fmt(r["wall_s"]) for r in runs), fmt(s["median_wall_s"])],
        [
            "measuring, run.elapsed_s (s)",
            *(fmt(r.get("elapsed_s")) for r in runs),
            fmt(s["median_measuring_s"]),
        ],
        ["exit code", *(str(r["exit_code"]) for r in runs), ""],
        [
            "floor p50 (µs)",
            *(us(r["floor_p50_ns"]) if r.get("floor_p50_ns") else "—" for r in runs),
            "",
        ],
        [
            "100 B get p50 (µs)",
            *(us(r["get_100b_p50_ns"]) if r.get("get_100b_p50_ns") else "—" for r in runs),
            "",
        ],
        [
            "cells floor/get/set/multiget",
            *("/".join(str(v) for v in r["cells"].values()) if "cells" in r else "—" for r in runs),
            "",
        ],
        [
            "samples per cell",
            *(",".join(map(str, r.get("samples_per_cell", []))) or "—" for r in runs),
            "",
        ],
        [
            "load (1 min) after",
            *(str(r["load_after"][0]) if r["load_after"] else "?" for r in runs),
            "",
        ],
    ]
    return markdown_table(head, rows)


def print_default(result: dict[str, Any]) -> None:
    s = result["summary"]
    print()
    print("\n".join(default_table(result)))
    print()
    print("\n".join(goals_table(s["goals"], unit=" s")))
    print(f"every run under {DEFAULT_RUN_GOAL_S:.0f} s: {'yes' if s['all_under_goal'] else 'no'}")
    if s["runs_with_problems"]:
        print(f"runs with problems (exit code, errors, mismatches): {s['runs_with_problems']}")
    print(f"overall: {'PASS' if s['pass'] else 'FAIL'} in {result['elapsed_s']} s")


# -- records ---------------------------------------------------------------------------------


def environment_lines(result: dict[str, Any], memcached_version: str | None) -> list[str]:
    m = result["machine"]
    rows = [
        ["date (UTC)", result["started"]],
        ["git commit", m.get("commit", "unknown")],
        ["cachelab", str(m.get("cachelab_version"))],
        ["memcached", memcached_version or "unknown"],
        ["pymemcache", str(m.get("pymemcache_version"))],
        ["Python", f"{m.get('python_implementation')} {m.get('python')}"],
        ["CPU", f"{m.get('cpu_model')} ({m.get('cpus')} CPUs)"],
        ["kernel", str(m.get("kernel"))],
        ["OS", str(m.get("os"))],
        ["client pinning", pinned_to(result["pinning"]["client_cpus"])],
        ["server pinning", str(result["pinning"]["server"])],
    ]
    return markdown_table(["fact", "value"], rows)


def pinned_to(cpus: Any) -> str:
    return f"CPUs {cpus}" if isinstance(cpus, list) else str(cpus)



def write_record(result: dict[str, Any]) -> Path:
    day = result["started"][:10]
    path = record_base(result["benchmark"], day).with_suffix(".md")
    s = result["summary"]
    lines = []
    if result["benchmark"] == "profile-overhead":
        srv = result["server"]
        med = s["median_p50_ns"]
        rr = s["median_of_round_ratios"]
        lines += [
            f"# Profile overhead, {result['started']}",
            "",
            f"Result: **{'PASS' if s['pass'] else 'FAIL'}** — median p50 over "
            f"{len(result['rounds'])} rounds: floor {us(med['floor'])} µs, cachelab "
            f"{us(med['cachelab'])} µs, pymemcache {us(med['pymemcache'])} µs; "
            f"cachelab/floor {rr['cachelab/floor']:.2f}x, cachelab/pymemcache "
            f"{rr['cachelab/pymemcache']:.2f}x (medians of per-round ratios).",
            "",
            "```",
            result["command"],
            "```",
            "",
            "## Goals",
            "",
            *goals_table(s["goals"]),
            "",
            "## Environment",
            "",
            *environment_lines(result, srv.get("version")),
            "",
            f"Server: `{shlex.join(srv['argv'])}`"
            if srv.get("argv")
            else f"Server: {srv['address']} (not started by the benchmark)",
            "",
            "## Per-round p50 and ratios",
            "",
            f"{result['settings']['rounds']} rounds; each round: one `cachelab.profile` call "
            f"(floor and {VALUE_SIZE} B get interleaved, {result['settings']['samples']} "
            f"samples after {result['settings']['warmup']} warm-up) and the same number of "
            "pymemcache gets, half before and half after the cachelab call.",
            "",
            *overhead_table(result),
            "",
            f"Ratio of the medians: cachelab/floor {s['ratio_of_medians']['cachelab/floor']:.2f}x,"
            f" cachelab/pymemcache {s['ratio_of_medians']['cachelab/pymemcache']:.2f}x.",
            "",
            "p90 / p99 per round (µs), for context:",
            "",
            *markdown_table(
                [
                    "round",
                    "floor p90",
                    "floor p99",
                    "cachelab p90",
                    "cachelab p99",
                    "pymemcache p90",
                    "pymemcache p99",
                ],
                [
                    [
                        str(r["round"]),
                        us(r["cachelab"]["floor_ns"]["90.0"]),
                        us(r["cachelab"]["floor_ns"]["99.0"]),
                        us(r["cachelab"]["get_ns"]["90.0"]),
                        us(r["cachelab"]["get_ns"]["99.0"]),
                        us(r["pymemcache"]["get_ns"]["90.0"]),
                        us(r["pymemcache"]["get_ns"]["99.0"]),
                    ]
                    for r in result["rounds"]
                ],
            ),
            "",
            "Measurement problems: "
            + (", ".join(f"{k} {n}" for k, n in s["problems"].items()) or "none")
            + f". Benchmark wall-clock: {result['elapsed_s']} s.",
        ]
    else:
        versions = {r.get("server_version") for r in result["rounds"]} - {None}
        argv = next((r["server_argv"] for r in result["rounds"] if r.get("server_argv")), None)
        lines += [
            f"# Default profile run time, {result['started']}",
            "",
            f"Result: **{'PASS' if s['pass'] else 'FAIL'}** — median wall-clock "
            f"{s['median_wall_s']:.1f} s (max {s['max_wall_s']:.1f} s) over "
            f"{len(result['rounds'])} runs, of which measuring (`run.elapsed_s`) "
            f"{s['median_measuring_s'] or float('nan'):.1f} s; goal < {DEFAULT_RUN_GOAL_S:.0f} s.",
            "",
            "```",
            result["command"],
            "```",
            "",
            f"Each run times, in a subprocess: `{result['timed_command']}` — the default spec "
            "(sizes 1,10,100,1K,10K,100K,1M; key counts 1,3,5,10,100; 10,000 samples per cell "
            "after 200 warm-up; plots written) against the private memcached the CLI starts "
            f"itself (its defaults). Pinning: {result['pinning']['server']}.",
            "",
            "## Goals",
            "",
            *goals_table(s["goals"], unit=" s"),
            "",
            f"Every run under {DEFAULT_RUN_GOAL_S:.0f} s: "
            f"{'yes' if s['all_under_goal'] else 'no'}. Runs with problems: "
            f"{s['runs_with_problems'] or 'none'}.",
            "",
            "## Environment",
            "",
            *environment_lines(result, ", ".join(sorted(versions)) or None),
            "",
            f"Server: `{shlex.join(argv)}` (port varies)" if argv else "",
            "",
            "## Per-run numbers",
            "",
            *default_table(result),
            "",
            f"Benchmark wall-clock: {result['elapsed_s']} s.",
        ]
    raw = path.with_suffix(".json").name
    lines += ["", f"Raw numbers: [{raw}]({raw})", ""]
    path.write_text("\n".join(lines))
    path.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    return path


# -- the command line ------------------------------------------------------------------------


def cpu_set(text: str) -> set[int]:
    """``0`` or ``0,2`` or ``0-3``."""
    out: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected CPUs such as 0 or 0,1 or 0-1, not {text!r}"
        ) from None
    return out


def positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="benches/profile_overhead.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--default-run",
        action="store_true",
        help="time the full default `cachelab profile` instead (goal: < 60 s)",
    )
    p.add_argument(
        "--rounds",
        type=positive,
        metavar="N",
        help=f"rounds (default {DEFAULTS['rounds']}; "
        f"{DEFAULTS['default_rounds']} runs with --default-run)",
    )
    p.add_argument(
        "--samples",
        type=positive,
        default=DEFAULTS["samples"],
        metavar="N",
        help=f"samples kept per measurement per round (default {DEFAULTS['samples']})",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=DEFAULTS["warmup"],
        metavar="N",
        help=f"samples run first and discarded (default {DEFAULTS['warmup']})",
    )
    p.add_argument(
        "--server",
        metavar="HOST:PORT",
        help="an existing memcached (or unix:PATH); default: a private pinned one",
    )
    p.add_argument(
        "--client-cpus",
        type=cpu_set,
        default={0},
        metavar="CPUS",
        help="pin this process and its threads here (default 0); overhead benchmark only",
    )
    p.add_argument(
        "--server-cpus",
        default="1",
        metavar="CPUS",
        help="taskset CPUs of the private memcached (default 1)",
    )
    p.add_argument(
        "--server-threads",
        type=positive,
        default=1,
        metavar="N",
        help="threads of the private memcached (default 1)",
    )
    p.add_argument(
        "--cli-cpus",
        metavar="CPUS",
        help="--default-run only: run the CLI under taskset -c CPUS (its private memcached "
        "inherits them); default: unpinned, as a user runs it",
    )
    p.add_argument("--no-pin", action="store_true", help="pin neither client nor server")
    p.add_argument("--json", type=Path, metavar="PATH", help="save the raw numbers here")
    p.add_argument(
        "--record",
        action="store_true",
        help="write a dated record (markdown and JSON) into benches/runs/",
    )
    args = p.parse_args(argv)
    if args.rounds is None:
        args.rounds = DEFAULTS["default_rounds"] if args.default_run else DEFAULTS["rounds"]
    if args.warmup < 0:
        p.error("--warmup must be 0 or more")
    if args.server:
        try:
            pymemcache_server(args.server)
        except ValueError as e:
            p.error(str(e))
    if args.no_pin:
        args.client_cpus, args.server_cpus = None, None
    if args.client_cpus and not args.client_cpus <= os.sched_getaffinity(0):
        p.error(f"--client-cpus {sorted(args.client_cpus)}: not all of them are usable here")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.default_run:
            result = run_default(args)
            print_default(result)
        else:
            result = run_overhead(args)
            print_overhead(result)
    except CachelabError as e:
        print(f"profile_overhead: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("profile_overhead: interrupted; nothing recorded", file=sys.stderr)
        return 2
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
        print(f"raw numbers: {args.json}")
    if args.record:
        path = write_record(result)
        print(f"recorded: {path.relative_to(HERE.parent)} (and .json)")
    return 0 if result["summary"]["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
