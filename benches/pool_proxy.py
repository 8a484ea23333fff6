"""A memcached pool driven directly (client-side ketama) and through twemproxy, side by side:
what the proxy hop costs, per percentile, in one session.

Three private memcached servers on 127.0.0.2–4 (``-t 1`` each) and one nutcracker in front of
them (``distribution: ketama``, ``hash: md5``: the same placement as cachelab's ``ketama``,
checked key by key in tests/base/test_twemproxy.py). Contenders, interleaved round by round:

* *direct* — ``load(spec, server=[members])``: each connection holds a socket per member and
  hashes keys itself (as libmemcached does);
* *proxy* — ``load(spec, server=proxy, behind=[members])``: every request goes to nutcracker,
  which hashes and forwards.

The workload is an open loop of ``--rate`` requests/s (90 % gets, 10 % sets; multi-gets of 10
keys when ``--multiget``), so both contenders carry the same schedule and latency counts from
the intended send time. Reported per contender (median over rounds, min–max): p50/p90/p99/
p99.9 (corrected), the client's CPU per reply, nutcracker's CPU per reply (from
``/proc/PID/stat`` around each proxy run), and the ratios proxy/direct per percentile.

On a 2-core machine client, proxy and servers share the CPUs (``--pin`` pins the client to
CPU 1 and servers and proxy to CPU 0): the point is the hop's added latency and CPU, not
absolute figures. ``--record`` writes ``benches/runs/<date>-pool-proxy.md`` and the JSON.
Exit 0 when every run held its rate without errors, 1 otherwise; "skipped" and 0 when
nutcracker is not installed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from datetime import date
from pathlib import Path
from typing import Any

from cachelab.errors import CachelabError
from cachelab.load import LoadResult, LoadSpec, load
from cachelab.proxies import PrivateTwemproxy, find_nutcracker
from cachelab.servers import PrivateMemcached
from records import header, markdown_table, write_record

CONTENDERS = ("direct", "proxy")
PCTS = ("50", "90", "99", "99.9")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def figures(result: LoadResult, proxy_cpu_s: float | None) -> dict[str, Any]:
    t = result.totals
    pct = (t["corrected"] or t["uncorrected"])["percentiles"]
    replies = max(1, result.all["replies"])
    return {
        "achieved": t["throughput"], "held": bool(result.schedule and result.schedule["held"]),
        "errors": sum(result.all["errors"].values()) + result.all["lost"],
        **{f"p{p}_us": pct[p] / 1e3 for p in PCTS},
        "client_cpu_us_per_op": result.client["cpu_us_per_op"],
        "proxy_cpu_us_per_op": None if proxy_cpu_s is None else proxy_cpu_s * 1e6 / replies,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rate", type=float, default=5000.0)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--multiget", action="store_true", help="a third of requests multi-gets")
    ap.add_argument("--pin", action="store_true", help="client on CPU 1, servers on CPU 0")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    try:
        nutcracker = find_nutcracker()
    except CachelabError as e:
        print(f"skipped: {e}")
        return 0
    if args.pin:
        os.sched_setaffinity(0, {1})
    mix = ({"get": 0.6, "multiget": 0.3, "set": 0.1} if args.multiget
           else {"get": 0.9, "set": 0.1})
    spec = LoadSpec(connections=args.connections, rate=args.rate, duration=args.duration,
                    warmup=1.0, interval=1.0, key_space=10_000, mix=mix, multiget_keys=10,
                    seed=1)
    cpus = "0" if args.pin else None
    members = [PrivateMemcached(host=f"127.0.0.{i}", threads=1, cpus=cpus) for i in (2, 3, 4)]
    rows: dict[str, list[dict[str, Any]]] = {c: [] for c in CONTENDERS}
    proxy = None
    try:
        for m in members:
            m.start()
        addresses = [m.address for m in members]
        proxy = PrivateTwemproxy(addresses, distribution="ketama", hash="md5")
        proxy.start()
        if args.pin and proxy.pid is not None:
            os.sched_setaffinity(proxy.pid, {0})
        for r in range(args.rounds):
            for name in CONTENDERS if r % 2 == 0 else CONTENDERS[::-1]:
                if name == "direct":
                    row = figures(load(spec, server=addresses), None)
                else:
                    assert proxy.pid is not None
                    before = cpu_seconds(proxy.pid)
                    result = load(spec, server=proxy.address, behind=addresses)
                    row = figures(result, cpu_seconds(proxy.pid) - before)
                rows[name].append(row)
                print(f"round {r + 1} {name:7} {row['achieved']:7.0f}/s held={row['held']} "
                      + " ".join(f"p{p} {row[f'p{p}_us']:7.1f}" for p in PCTS)
                      + f" µs; client CPU/op {row['client_cpu_us_per_op']:.2f} µs"
                      + (f", proxy {row['proxy_cpu_us_per_op']:.2f} µs"
                         if row["proxy_cpu_us_per_op"] is not None else ""), flush=True)
        versions = f"memcached {members[0].version}, {nutcracker}"
    finally:
        if proxy is not None:
            proxy.stop()
        for m in members:
            m.stop()

    def med(name: str, key: str) -> float | None:
        vals = [r[key] for r in rows[name] if r[key] is not None]
        return statistics.median(vals) if vals else None

    def rng(name: str, key: str) -> str:
        vals = [r[key] for r in rows[name] if r[key] is not None]
        return f"{statistics.median(vals):.1f} ({min(vals):.1f}–{max(vals):.1f})" if vals else "—"

    head = ["contender", "achieved/s", "held", *(f"p{p} µs" for p in PCTS),
            "client CPU µs/op", "proxy CPU µs/op"]
    table = [[name, rng(name, "achieved"), f"{sum(r['held'] for r in rows[name])}/"
              f"{len(rows[name])}", *(rng(name, f"p{p}_us") for p in PCTS),
              rng(name, "client_cpu_us_per_op"), rng(name, "proxy_cpu_us_per_op")]
             for name in CONTENDERS]
    ratio_row = ["proxy / direct", "", ""]
    for p in PCTS:
        d, x = med("direct", f"p{p}_us"), med("proxy", f"p{p}_us")
        ratio_row.append(f"{x / d:.2f}× (+{x - d:.1f} µs)" if d and x else "—")
    d, x = med("direct", "client_cpu_us_per_op"), med("proxy", "client_cpu_us_per_op")
    ratio_row += [f"{x / d:.2f}×" if d and x else "—", ""]
    table.append(ratio_row)
    ok = all(r["held"] and not r["errors"] for rs in rows.values() for r in rs)
    md, commit = header(
        "a pool direct vs through twemproxy", "pool_proxy.py", sys.argv[1:],
        [f"{versions}; three servers on 127.0.0.2–4 (`-t 1`), nutcracker with ketama + md5",
         f"workload: open loop {args.rate:.0f}/s Poisson, {args.connections} connections, "
         f"mix {mix}, {args.duration:g} s after a 1 s warm-up, {args.rounds} rounds "
         "interleaved" + ("; client pinned to CPU 1, servers and proxy to CPU 0"
                          if args.pin else "")])
    md += ["Median over rounds (min–max); latency corrected (from the intended send time):", "",
           *markdown_table(head, table), "",
           f"All runs held their rate without errors: {'yes' if ok else 'NO'}."]
    text = "\n".join(md)
    print(text)
    if args.record:
        path = write_record("pool-proxy", date.today().isoformat(), text,
                            {"args": vars(args), "rows": rows, "commit": commit})
        print(f"recorded {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
