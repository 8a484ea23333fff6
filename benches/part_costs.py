"""How long does ``simulate TRACE`` take to hand each part's costs to Python? The two ways of
``_core.RequestStream.part_costs`` side by side on the same parts: every column as a list (one
Python object a value, then ``np.asarray``) against the cost terms' columns as little-endian
``f64`` bytes (``np.frombuffer``), which ``simulate`` uses.

A ``trace synth`` trace of ``--requests`` requests is written to a temporary Parquet file and
simulated in parts under ``--strategy`` (one draw); after each part both ways are timed, in
alternating order, and their arrays must be equal. ``--record`` writes
``benches/runs/<date>-part-costs.md`` and the JSON.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

import cachelab._core as _core
from cachelab.simulate import SimulateSpec, latency_model
from cachelab.simulate.request import strategies_for
from cachelab.simulate.terms import COLUMNS
from cachelab.traces import SynthParams
from cachelab.traces.stream import open_request_parts
from cachelab.traces.synth import write_synth
from records import header, markdown_table, write_record


def as_lists(stream: _core.RequestStream) -> dict[str, np.ndarray]:
    costs = stream.part_costs(0)
    return {name: np.asarray(costs[name], dtype=np.float64) for name in COLUMNS}


def as_bytes(stream: _core.RequestStream) -> dict[str, np.ndarray]:
    return {name: np.frombuffer(b, "<f8")
            for name, b in stream.part_costs(0, list(COLUMNS)).items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--strategy", default="fixed:2000+prefetch-children")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    if args.requests < 1:
        ap.error("--requests must be at least 1")
    spent = {"lists": 0.0, "bytes": 0.0}
    with tempfile.TemporaryDirectory(prefix="cachelab-part-costs-") as tmp:
        path = Path(tmp) / "t.parquet"
        write_synth(SynthParams(requests=args.requests), path)
        src = open_request_parts(path, "parquet", 1 << 16)
        spec = SimulateSpec(strategies=[args.strategy], draws=1)
        model = latency_model(spec.model)
        canonical = strategies_for(spec, model, src.n_items)
        stream = _core.RequestStream(**src.core_catalog(), model=model.to_core(),
                                     strategies=canonical, requests=src.n_requests,
                                     train=spec.train, draws=1, seed=0, costs=True)
        if stream.needs_training:
            for part in src.parts():
                if not stream.train(**part.core_columns()):
                    break
        parts = 0
        for part in src.parts():
            stream.feed(**part.core_columns())
            got = {}
            for way in (("lists", "bytes") if parts % 2 else ("bytes", "lists")):
                t0 = time.process_time()
                got[way] = (as_lists if way == "lists" else as_bytes)(stream)
                spent[way] += time.process_time() - t0
            for name in COLUMNS:
                if not np.array_equal(got["lists"][name], got["bytes"][name]):
                    raise SystemExit(f"part {parts}: column {name} differs")
            parts += 1
        stream.finish()
    ratio = spent["lists"] / spent["bytes"] if spent["bytes"] else float("nan")
    md, commit = header("Handing a part's costs to Python: lists vs bytes", "part_costs.py",
                        sys.argv[1:], [f"`trace synth` of {args.requests:,} requests, "
                                       f"{parts} parts of 65,536, strategy `{args.strategy}`; "
                                       "both ways after every part, alternating; equal arrays"])
    md += markdown_table(["way", "CPU s (all parts)", "per request ns"], [
        [way, f"{s:.3f}", f"{1e9 * s / args.requests:.0f}"] for way, s in spent.items()])
    md += ["", f"lists / bytes: {ratio:.1f}x", ""]
    text = "\n".join(md)
    print(text)
    if args.record:
        out = write_record("part-costs", date.today().isoformat(), text,
                           {"args": vars(args), "cpu_s": spent, "ratio": ratio,
                            "commit": commit})
        print(f"recorded {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
