"""The comparison's forest plot: a row per (item, metric), the relative change of each other
result against A with its interval (green better, red worse, grey unclear)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["compare_plot"]

_COLOURS = {"better": "#2f8f46", "worse": "#c0392b", "": "#6b7785"}
_MARKERS = "os^dv"


def compare_plot(result: Any, out_base: Path, max_rows: int = 48) -> list[Path]:
    """A forest plot of a :class:`~cachelab.compare.CompareResult` (or its dict); writes
    ``<out_base>.png`` and ``.svg``."""
    # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
    from cachelab.plots.figure import new_figure, save

    d = result.to_dict() if hasattr(result, "to_dict") else result
    rows = [x for x in d["rows"] if x["relative"] is not None][: max_rows * 4]
    labels = list(dict.fromkeys(f"{x['item']} · {x['metric']}" for x in rows))[:max_rows]
    pairs = list(dict.fromkeys(x["versus"] for x in rows))
    fig = new_figure((8.0, 1.6 + 0.22 * max(1, len(labels))))
    ax = fig.add_subplot()
    for pi, pair in enumerate(pairs):
        off = (pi - (len(pairs) - 1) / 2) * 0.22
        for x in rows:
            lab = f"{x['item']} · {x['metric']}"
            if x["versus"] != pair or lab not in labels:
                continue
            y = labels.index(lab) + off
            v = 100 * x["relative"]
            c = _COLOURS.get(x["direction"], "#6b7785")
            if x["ci_low"] is not None and x["ci_high"] is not None:
                ax.plot([100 * x["ci_low"], 100 * x["ci_high"]], [y, y], color=c, linewidth=1.6)
            ax.plot([v], [y], marker=_MARKERS[pi % 5], color=c, markersize=4.5)
    if len(pairs) > 1:
        for pi, pair in enumerate(pairs):
            ax.plot([], [], marker=_MARKERS[pi % 5], color="#6b7785", linestyle="", label=pair)
        ax.legend(fontsize=7, loc="best")
    ax.axvline(0, color="#333", linewidth=0.8)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("change relative to A (%), with its interval")
    ax.set_title(f"{d['kind']}: {' · '.join(pairs)}  (green better, red worse, grey unclear)",
                 fontsize=9, loc="left")
    ax.grid(axis="x", alpha=0.3)
    return save(fig, out_base)
