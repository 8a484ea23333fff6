"""Does `cachelab size` predict what a real memcached of known size did? A capture of a zipf
look-aside workload, its predicted hit ratio at the server's memory next to the observed one.

One private memcached (``-m --memory-mb``, ``-t 2``), empty at the start. While a capture
(:func:`cachelab.traces.capture.capture`, the Rust reader) watches it, this process runs
``--requests`` look-aside requests: a get of a key drawn from a Zipf(``--alpha``) popularity
over ``--keys`` keys, and on a miss a set of the key's value. Each key has one fixed value size,
log-normal (median ``--median``, sigma ``--sigma``, capped at 512 KB), so the items spread over
many slab classes. The workload is several times the server's memory, so it evicts.

Then :func:`cachelab.size.sizing.size` on the capture: the LRU miss-ratio curve by bytes as
memcached counts memory (each item's slab chunk) and as value bytes, and its check — the
observed hit ratio (the server's own answers in the capture) against the prediction at the
server's memory, cold and warm. The server started empty and the capture began before the
first request, so the cold prediction is the one to compare. The server's own ``get_hits /
cmd_get`` over the run is printed too, with the capture's lost lines (the capture keeps every
line when the reader keeps up). ``--repeat N`` runs N workloads of different seeds.

Lines the capture lost are counted, with where they were lost (the server's
``log_worker_dropped``: its logger thread did not drain the worker threads' log buffers in
time, which no reader can prevent; ``log_watcher_skipped``: the capture fell behind).

``--record`` writes ``benches/runs/<date>-size-check.md`` and the JSON. Exit 0 when every run's
observed ratio lies within ``--tolerance`` (absolute) of the cold prediction, else 1.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from cachelab import _core
from cachelab.servers import PrivateMemcached, read_stats
from cachelab.size.sizing import SizeSpec, size
from cachelab.traces.capture import CaptureSpec, capture
from records import header, markdown_table, write_record


def stats(address: str) -> dict[str, str]:
    return read_stats(address, timeout=5.0)


def workload(address: str, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """The look-aside requests; what they did, by the client's own count."""
    rng = np.random.default_rng(seed)
    p = np.arange(1, args.keys + 1, dtype=float) ** -args.alpha
    p /= p.sum()
    sizes = np.minimum(rng.lognormal(np.log(args.median), args.sigma, args.keys),
                       512 * 1024).astype(np.int64)
    sizes = np.maximum(sizes, 1)
    rank_to_key = rng.permutation(args.keys)
    picks = rank_to_key[rng.choice(args.keys, size=args.requests, p=p)]
    blob = bytes(rng.integers(0, 256, size=int(sizes.max()), dtype=np.uint8))
    hits = 0
    t0 = time.perf_counter()
    with _core.Client(address, timeout=5.0, connect_timeout=5.0) as c:
        for i, k in enumerate(picks.tolist()):
            key = f"sz:{k}"
            if c.get(key) is None:
                c.set(key, blob[:int(sizes[k])])
            else:
                hits += 1
            if i % 64 == 63:
                time.sleep(0)  # let the capture's thread run
    return {"requests": args.requests, "hits": hits, "seconds": time.perf_counter() - t0,
            "working_set_bytes": int(sizes.sum()), "mean_size": float(sizes.mean())}


def one_run(args: argparse.Namespace, seed: int, tmp: Path) -> dict[str, Any]:
    path = tmp / f"run{seed}.capture.parquet"
    with PrivateMemcached(memory_mb=args.memory_mb, threads=2) as mc:
        done = threading.Event()
        holder: dict[str, Any] = {}

        def run_capture() -> None:
            try:
                holder["result"] = capture(CaptureSpec(mc.address, duration=3600), path,
                                           stop=done.is_set)
            except Exception as e:  # noqa: BLE001 - reported in the record
                holder["error"] = repr(e)

        t = threading.Thread(target=run_capture)
        t.start()
        time.sleep(0.5)
        before = stats(mc.address)
        work = workload(mc.address, args, seed)
        after = stats(mc.address)
        time.sleep(0.5)
        done.set()
        t.join(60)
    if "error" in holder:
        raise SystemExit(f"capture failed: {holder['error']}")
    gets = int(after["cmd_get"]) - int(before["cmd_get"])
    server_hit = (int(after["get_hits"]) - int(before["get_hits"])) / max(1, gets)
    mem = size(SizeSpec(trace=str(path), hit_ratios=(0.5,)))
    val = size(SizeSpec(trace=str(path), hit_ratios=(0.5,), accounting="value"))
    k, kv = mem.check or {}, val.check or {}
    return {
        "seed": seed, "workload": work,
        "server": {"hit_ratio": server_hit, "gets": gets,
                   "evictions": int(after["evictions"]) - int(before["evictions"]),
                   "limit_maxbytes": int(after["limit_maxbytes"]),
                   # Where lost lines went: the workers' log buffers (the server's logger
                   # thread fell behind) or the watcher's (the capture fell behind).
                   **{k: int(after.get(k, 0)) - int(before.get(k, 0))
                      for k in ("log_worker_dropped", "log_watcher_skipped")}},
        "observed": k.get("observed"), "lost_lines": k.get("lost_lines"),
        "predicted_cold": k.get("predicted_cold"), "predicted_warm": k.get("predicted_warm"),
        "value_bytes_cold": kv.get("predicted_cold"), "verdict": k.get("verdict"),
        "capture_requests": mem.requests, "keys": mem.keys,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memory-mb", type=int, default=32)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--alpha", type=float, default=0.9)
    ap.add_argument("--median", type=float, default=1200.0)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--requests", type=int, default=400_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=0.02)
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    if min(args.memory_mb, args.keys, args.requests, args.repeat) < 1:
        ap.error("--memory-mb, --keys, --requests and --repeat must be at least 1")
    runs = []
    with tempfile.TemporaryDirectory(prefix="cachelab-size-check-") as tmp:
        for seed in range(1, args.repeat + 1):
            runs.append(one_run(args, seed, Path(tmp)))
            r = runs[-1]
            print(f"run {seed}: observed {r['observed']:.4f}, predicted cold "
                  f"{r['predicted_cold']:.4f} (value bytes {r['value_bytes_cold']:.4f}), "
                  f"server {r['server']['hit_ratio']:.4f}, lost {r['lost_lines']} (worker "
                  f"dropped {r['server']['log_worker_dropped']}, watcher skipped "
                  f"{r['server']['log_watcher_skipped']})",
                  file=sys.stderr)

    def f(x: float | None) -> str:
        return "—" if x is None else f"{x * 100:.2f} %"

    rows = [[str(r["seed"]), f"{r['capture_requests']:,}", f(r["server"]["hit_ratio"]),
             f(r["observed"]), f(r["predicted_cold"]), f(r["predicted_warm"]),
             f(r["value_bytes_cold"]),
             f"{(r['predicted_cold'] - r['observed']) * 100:+.2f} pt",
             f"{r['server']['evictions']:,}",
             f"{r['lost_lines']:,} ({r['server']['log_worker_dropped']:,} / "
             f"{r['server']['log_watcher_skipped']:,})"] for r in runs]
    gaps = [r["predicted_cold"] - r["observed"] for r in runs]
    ok = all(abs(g) <= args.tolerance for g in gaps)
    md, commit = header(
        "size: predicted vs observed hit ratio of a real memcached", "size_check.py",
        sys.argv[1:],
        [f"memcached: private, `-m {args.memory_mb} -t 2`, empty at the start; workload: "
         f"look-aside (get; set on a miss), Zipf {args.alpha} over {args.keys:,} keys, value "
         f"sizes log-normal median {args.median:g} B sigma {args.sigma:g} (one per key, capped "
         f"at 512 KB), {args.requests:,} requests per run from one Python client",
         "capture: Rust reader, started before the first request; predicted: `cachelab size` "
         "on the capture (memcached accounting unless said)"])
    md += markdown_table(
        ["run", "gets captured", "server get_hits/cmd_get", "observed in capture",
         "predicted cold", "predicted warm", "cold, value bytes", "cold − observed",
         "evictions", "lost lines (worker dropped / watcher skipped)"], rows)
    md += ["", f"Median of (cold − observed): {statistics.median(gaps) * 100:+.2f} points; "
           f"tolerance ±{args.tolerance * 100:g} points: **{'PASS' if ok else 'FAIL'}**.", "",
           f"Verdict of `size` on run 1: {runs[0]['verdict']}."]
    text = "\n".join(md)
    print(text)
    if args.record:
        path = write_record("size-check", date.today().isoformat(), text,
                            {"args": vars(args), "runs": runs, "commit": commit})
        print(f"recorded {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
