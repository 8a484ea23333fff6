"""The same open-loop load from 1 Ray agent and from 2, next to a local run, in one session.

Contenders, interleaved round by round against one private memcached (on 127.0.0.5):

* *local* — ``cachelab.load.load(spec)``: the engine in this process, no Ray;
* *1 agent* — ``load_on_ray(spec, agents=1)``: the engine in one Ray actor;
* *2 agents* — ``load_on_ray(spec, agents=2)``: two actors on two nodes, half the connections
  and half the rate each, their histograms merged.

The cluster is ``--nodes`` raylets on this machine (``ray.cluster_utils.Cluster``), each on its
own loopback address (127.0.0.2, 127.0.0.3, …), so all traffic stays on loopback. Each run is
``--rate`` requests/s Poisson over ``--connections`` connections for ``--duration`` seconds
after a 1 s warm-up. Reported per contender (median over rounds, with the range): the achieved
rate and whether the schedule held, the merged corrected and uncorrected p50/p99, the load
threads' CPU per reply (``client.cpu_us_per_op``) and the whole engine process's CPU per reply
(``client.process_cpu_us_per_op``: for an agent, the actor process with Ray's own threads — the
overhead of Ray in CPU per op), and the driver's CPU per reply over the whole call (start-up,
placement and merge included).

On one machine every contender shares its CPUs with memcached, Ray's daemons and the other
agents: the point is whether splitting a rate over agents changes what is measured (merged
p50/p99 within the noise of one agent's), not absolute numbers.

``--record`` writes ``benches/runs/<date>-ray-agents.md`` (``-2``, … if taken) and the JSON
beside it. Exit status 0 when every run held its rate without errors, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

import ray
from ray.cluster_utils import Cluster

import cachelab
from cachelab.load import LoadResult, LoadSpec, load, load_on_ray
from cachelab.raycluster import RayOptions
from cachelab.servers import PrivateMemcached
from records import header, markdown_table, write_record

HEAD_IP = "127.0.0.2"
CONTENDERS = ("local", "1 agent", "2 agents")


def figures(result: LoadResult, driver_cpu_s: float) -> dict[str, Any]:
    """What one run measured."""
    t, c = result.totals, result.client
    corr, unc = t["corrected"]["percentiles"], t["uncorrected"]["percentiles"]
    replies = max(1, result.all["replies"])
    return {
        "achieved": t["throughput"], "held": bool(result.schedule and result.schedule["held"]),
        "errors": sum(result.all["errors"].values()) + result.all["lost"],
        "p50_us": corr["50"] / 1e3, "p99_us": corr["99"] / 1e3,
        "unc_p50_us": unc["50"] / 1e3, "unc_p99_us": unc["99"] / 1e3,
        "cpu_us_per_op": c["cpu_us_per_op"], "process_cpu_us_per_op": c["process_cpu_us_per_op"],
        "driver_cpu_us_per_op": driver_cpu_s * 1e6 / replies,
        "replies": result.all["replies"],
        "agents": None if result.agents is None else [
            {k: a.get(k) for k in ("agent", "node_ip", "connections", "intended_rate",
                                   "achieved_rate", "cpu_us_per_op", "process_cpu_us_per_op",
                                   "start_skew_ms", "verdict")} | {"clock": a["clock"]}
            for a in result.agents["list"]],
    }


def run_one(name: str, spec: LoadSpec, server: str, address: str) -> dict[str, Any]:
    cpu0 = time.process_time()
    if name == "local":
        result = load(spec, server=server)
    else:
        agents = int(name.split()[0])
        result = load_on_ray(spec, RayOptions(address=address, agents=agents, node_ip=HEAD_IP),
                             server=server)
    return figures(result, time.process_time() - cpu0)


def med(rows: list[dict[str, Any]], key: str) -> tuple[float, float, float]:
    vals = [r[key] for r in rows if r[key] is not None]
    return statistics.median(vals), min(vals), max(vals)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rate", type=float, default=4000.0)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()

    root = str(Path(cachelab.__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
    spec = LoadSpec(connections=args.connections, rate=args.rate, duration=args.duration,
                    warmup=1.0, interval=1.0, key_space=10_000, seed=1)
    node = {"num_cpus": 2, "object_store_memory": 80 * 2**20}
    cluster = Cluster(initialize_head=True,
                      head_node_args={"node_ip_address": HEAD_IP, "include_dashboard": False,
                                      **node})
    rows: dict[str, list[dict[str, Any]]] = {c: [] for c in CONTENDERS}
    try:
        for n in range(1, args.nodes):
            cluster.add_node(node_ip_address=f"127.0.0.{2 + n}", **node)
        cluster.wait_for_nodes(timeout=60)
        ray.init(address=cluster.address, _node_ip_address=HEAD_IP, log_to_driver=False)
        with PrivateMemcached(host="127.0.0.5", threads=2) as mc:
            for r in range(args.rounds):
                order = CONTENDERS if r % 2 == 0 else CONTENDERS[::-1]
                for name in order:
                    row = run_one(name, spec, mc.address, cluster.address)
                    rows[name].append(row)
                    print(f"round {r + 1} {name:9} {row['achieved']:8.0f}/s held={row['held']} "
                          f"p50 {row['p50_us']:7.1f} p99 {row['p99_us']:8.1f} µs  CPU/op "
                          f"{row['cpu_us_per_op']:.2f} (process {row['process_cpu_us_per_op']:.2f},"
                          f" driver {row['driver_cpu_us_per_op']:.2f}) µs", flush=True)
            server_argv = " ".join(mc.argv)
    finally:
        ray.shutdown()
        cluster.shutdown()

    head = ["contender", "achieved/s", "held", "p50 µs", "p99 µs", "unc. p50 µs", "unc. p99 µs",
            "CPU µs/op (threads)", "CPU µs/op (process)", "driver CPU µs/op"]
    table = []
    for name in CONTENDERS:
        rs = rows[name]

        def cell(key: str, fmt: str = "{:.1f}", rs: list[dict[str, Any]] = rs) -> str:
            m, lo, hi = med(rs, key)
            return f"{fmt.format(m)} ({fmt.format(lo)}–{fmt.format(hi)})"

        table.append([name, cell("achieved", "{:.0f}"),
                      f"{sum(r['held'] for r in rs)}/{len(rs)}", cell("p50_us"), cell("p99_us"),
                      cell("unc_p50_us"), cell("unc_p99_us"), cell("cpu_us_per_op", "{:.2f}"),
                      cell("process_cpu_us_per_op", "{:.2f}"),
                      cell("driver_cpu_us_per_op", "{:.2f}")])
    ok = all(r["held"] and not r["errors"] for rs in rows.values() for r in rs)
    md, commit = header(
        "load from 1 vs 2 Ray agents vs local", "ray_agents.py", sys.argv[1:],
        [f"memcached: `{server_argv}`; cluster: {args.nodes} raylets on this machine "
         f"(127.0.0.2…), Ray {ray.__version__}",
         f"workload: open loop {args.rate:.0f}/s Poisson, {args.connections} connections, "
         f"{args.duration:g} s after a 1 s warm-up, {args.rounds} rounds interleaved"])
    md += ["Median over rounds (min–max):", "", *markdown_table(head, table), "",
           f"All runs held their rate without errors: {'yes' if ok else 'NO'}."]
    text = "\n".join(md)
    print(text)
    if args.record:
        path = write_record("ray-agents", date.today().isoformat(), text,
                            {"args": vars(args), "rows": rows, "commit": commit})
        print(f"recorded {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
