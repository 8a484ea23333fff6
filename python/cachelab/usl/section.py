"""The USL fit's report section and chart (also used by scale's section)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cachelab.artifacts import Artifact
from cachelab.page import charts as ch
from cachelab.page.html import table
from cachelab.page.section import Context, Section, chart_specs, figures
from cachelab.units import num
from cachelab.usl.answers import bound_text
from cachelab.usl.quality import relative_se
from cachelab.usl.result import UslFit
from cachelab.usl.superlinear import describe

Spec = dict[str, Any]


def fit_rows(f: dict[str, Any]) -> list[list[str]]:
    """Rows of the coefficient table of a fit's JSON: γ, α, β, Nmax, the peak and the residual
    standard error, each with its interval (bootstrap for Nmax and the peak); then, for a
    superlinear start, the unbounded α and the payback load N×."""
    ci = f.get("ci") or {}
    boot = f.get("bootstrap") or {}
    peak = f.get("peak") or {}

    def iv(lo: Any, hi: Any) -> str:
        return f"[{num(lo)}, {num(hi)}]" if lo is not None or hi is not None else "—"

    rows = []
    for k, what in (("gamma", "γ (throughput at N = 1)"), ("alpha", "α (contention)"),
                    ("beta", "β (coherency)")):
        c = ci.get(k) or [None, None]
        rows.append([what, num(f.get(k), 4), iv(*c)])
    nb = boot.get("n_max") or {}
    xb = boot.get("x_max") or {}
    nmax = "∞" if peak.get("n_max_infinite") else num(peak.get("n_max"))
    rows.append(["Nmax (peak load)", nmax, f"[{num(nb.get('lo'))}, {bound_text(nb.get('hi'))}]"
                 if nb else "—"])
    rows.append(["peak throughput", num(peak.get("x_max")), iv(xb.get("lo"), xb.get("hi"))])
    rows.append(["residual standard error", num(f.get("sigma")), f"{_relative_se(f)} of mean X"])
    sup = f.get("superlinear")
    if sup:
        a = (sup.get("ci") or {}).get("alpha") or [None, None]
        rows.append(["α without bounds (superlinear)", num(sup["alpha"], 4), iv(*a)])
        nc = sup.get("n_cross_ci") or [None, None]
        rows.append(["N× (payback: capacity = N again)", num(sup.get("n_cross")), iv(*nc)])
    return rows


def _relative_se(f: dict[str, Any]) -> str:
    """The residual standard error of a fit's JSON as a share of its mean throughput."""
    pct = relative_se(f.get("x") or [], f.get("sigma"))
    return "—" if pct is None else f"{num(pct, 2)} %"


def fit_findings(f: dict[str, Any], what: str) -> list[str]:
    """Where the fit in ``f`` peaks (or that it has no peak), as a finding about ``what``."""
    peak = f.get("peak") or {}
    out = []
    if peak.get("n_max_infinite"):
        out.append(f"The {what} fit has no peak (β = 0): throughput keeps rising, towards "
                   f"{num(peak.get('amdahl_limit'))}/s (Amdahl).")
    elif peak.get("n_max") is not None:
        out.append(f"The {what} fit peaks at N ≈ {num(peak['n_max'])} with "
                   f"{num(peak.get('x_max'))}/s (residual standard error "
                   f"{_relative_se(f)} of the mean).")
    sup = f.get("superlinear")
    if sup:
        out.append(f"The {what} data start superlinearly: " + describe(sup, num))
    return out


def section(art: Artifact, ctx: Context) -> Section:
    """The fit in ``art``: data and fitted values, coefficients with intervals, the peak,
    warnings, and the fit's figure."""
    d = art.data
    sec = Section("USL fit", "usl", art.path)
    rows = [[num(n), num(x), num(f)] for n, x, f in zip(d["n"], d["x"], d["fitted"])]
    sec.body.append(table(["N", "measured", "fitted"], rows))
    sec.body.append(table(["", "value", f"{int(100 * d.get('level', 0.95))} % interval"],
                          fit_rows(d)))
    sec.findings += fit_findings(d, "USL")
    sec.notes += [w["message"] for w in d.get("warnings", [])]

    def redraw(out: Path) -> list[Path]:
        # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
        from cachelab.usl.plots import usl_plot

        return usl_plot(UslFit.from_dict(d, str(art.path)), out / "usl", xlabel="load N",
                        ylabel="throughput", title="USL fit")

    figs = figures(art, ctx, [("usl", "measured points, the fit and its band")], redraw,
                  chart_specs(lambda: {"usl": chart(d, where=str(art.path))}, sec))
    sec.add_figures(figs)
    return sec


def chart(fit: dict[str, Any], *, xlabel: str = "load N", ylabel: str = "throughput",
          title: str = "USL fit", where: str = "usl") -> Spec:
    """Measured points, the fitted curve with its confidence band, linear scaling and the
    peak (as :func:`cachelab.usl.plots.usl_plot`). The axes are scaled to the measured and
    predicted points and the peak: the curve, its band and linear scaling are reference
    lines, clipped to that range (linear scaling would otherwise climb far above the data and
    squash it into the bottom of the chart)."""
    f = UslFit.from_dict(fit, where)
    ns = [float(v) for v in f.n]
    right = max([*ns, *(float(p["n"]) for p in f.predictions)])
    n_max = f.peak.get("n_max")
    show_peak = ch.finite(n_max) and n_max <= 3 * max(ns)
    if show_peak:
        right = max(right, n_max * 1.15)
    right *= 1.05
    lo_n = min(1.0, min(ns)) * 0.5
    grid = [lo_n + (right - lo_n) * i / 199 for i in range(200)]
    preds = f.predict(grid)
    curve = {"name": f"USL fit ({f.method}): α = {num(f.alpha, 4)}, β = {num(f.beta)}, "
                     f"γ = {num(f.gamma, 4)}", "type": "line", "ref": True,
             "color": 0, "points": ch.xy((g, p["x"]) for g, p in zip(grid, preds))}
    band = [[ch.r(g), ch.r(p["x_lo"]), ch.r(p["x_hi"])] for g, p in zip(grid, preds)
            if ch.finite(p.get("x_lo")) and ch.finite(p.get("x_hi"))]
    if len(band) == len(grid):
        curve["band"] = band
        curve["band_name"] = f"{round(f.level * 100)} % confidence band"
    series = [
        {"name": "measured", "type": "points", "color": -1, "points": ch.xy(zip(f.n, f.x))},
        curve,
        {"name": "linear scaling γN", "type": "line", "dash": True, "color": -1, "ref": True,
         "points": ch.xy((g, f.gamma * g) for g in (grid[0], grid[-1]))},
    ]
    extra = [p for p in f.predictions if p["n"] > max(ns)]
    if extra:
        series.append({"name": "predicted", "type": "points",
                       "points": ch.xy((p["n"], p["x"]) for p in extra)})
    if show_peak and f.peak.get("x_max") is not None:
        series.append({"name": f"Nmax = {num(n_max)}", "type": "points",
                       "points": ch.xy([(n_max, f.peak["x_max"])])})
    return {"kind": "xy", "title": title, "x": ch.axis(xlabel), "y": ch.axis(ylabel),
            "series": series}
