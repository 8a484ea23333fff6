"""What a report's re-drawn plots cost: each verb's plots drawn from its JSON as PNG + SVG (what
a verb writes beside its result) against SVG alone (``cachelab.plots.figure.svg_only``, what a
report re-drawing plots draws, since its page embeds SVGs only).

A small profile of a private memcached and a simulation on a synthetic trace are made once;
then ``--rounds`` rounds, alternating the order, time ``render_report`` of a copy without
plots (so every plot is re-drawn) in this process's CPU time, once with the PNGs forced back
on and once as the report does it. ``--record`` writes ``benches/runs/<date>-plot-formats.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from unittest import mock

import cachelab.plots.figure as figure
from cachelab import traces
from cachelab.profile import ProfileSpec, profile
from cachelab.report import render_report
from cachelab.servers import PrivateMemcached
from cachelab.simulate import SimulateSpec, simulate
from records import header, markdown_table, median_range, write_record


@contextlib.contextmanager
def png_too() -> Iterator[None]:
    """``svg_only`` made a no-op: the re-draw writes PNG + SVG, as before it existed."""
    with mock.patch.object(figure, "svg_only", contextlib.nullcontext):
        yield


def results(root: Path) -> Path:
    """A profile and a simulation, saved without their plots (the report re-draws them)."""
    with PrivateMemcached() as mc:
        spec = ProfileSpec.quick(sizes=(100, 10_000), key_counts=(1, 10), samples=300, seed=1)
        profile(spec, server=mc.address).save(root / "profile" / "profile.json")
    trace = traces.synthesize(traces.SynthParams(requests=2_000))
    simulate(trace, SimulateSpec(draws=2, strategies=("none", "lru:100", "fixed:100"))).save(
        root / "simulate" / "simulate.json")
    return root


def timed(root: Path) -> float:
    t = time.process_time()
    render_report([root])
    return time.process_time() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    tmp = Path(tempfile.mkdtemp(prefix="cachelab-bench-plots-"))
    try:
        root = results(tmp / "r")
        timed(root)  # the imports and the font cache, untimed
        both: list[float] = []
        alone: list[float] = []
        for r in range(args.rounds):
            for name in ("both", "alone") if r % 2 == 0 else ("alone", "both"):
                if name == "both":
                    with png_too():
                        both.append(timed(root))
                else:
                    alone.append(timed(root))
            print(f"round {r + 1}: PNG + SVG {both[-1]:.2f} s, SVG alone {alone[-1]:.2f} s",
                  file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ratio = statistics.median(alone) / statistics.median(both)
    md, commit = header("a report's re-drawn plots: PNG + SVG vs SVG alone", "plot_formats.py",
                        sys.argv[1:], ["a profile (2 sizes, 2 key counts) and a simulation (3 "
                                       "strategies) re-drawn by render_report: 4 figures; "
                                       "CPU time of this process", f"{args.rounds} rounds, "
                                       "alternating"])
    md += markdown_table(["plots drawn", "CPU s (median, min–max)"],
                         [["PNG + SVG", median_range(both, "{:.2f}")],
                          ["SVG alone (what the report draws)", median_range(alone, "{:.2f}")]])
    md += ["", f"SVG alone / PNG + SVG: {ratio:.2f}x", ""]
    text = "\n".join(md)
    print(text)
    if args.record:
        path = write_record("plot-formats", date.today().isoformat(), text,
                            {"args": vars(args), "both": both, "alone": alone,
                             "commit": commit})
        print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
