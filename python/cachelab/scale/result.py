"""A sweep's result, :class:`ScaleResult` (schema ``cachelab.scale`` v1, docs/usl.md), and
everything made from it: ``scale.json``, ``scale.csv`` (one row per run), the throughput-vs-N
and latency-by-N figures, and the human summary."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cachelab.answers import Answer
from cachelab.artifacts import check_schema, from_fields, read_json, write_json
from cachelab.errors import UsageError
from cachelab.load import behind_headline, behind_lines
from cachelab.load.precision import longer_fix, p99_interval_text, point_precision_text
from cachelab.pool import parse_server
from cachelab.scale.answers import ceiling_line, scale_answers, server_name
from cachelab.scale.pinning import layout_text
from cachelab.scale.verdicts import latency_verdict, verdict_lines
from cachelab.tables import write_json_and_csv
from cachelab.units import of_asked, partial_note, us
from cachelab.usl import UslFit

__all__ = ["CSV_HEADER", "SCHEMA", "SCHEMA_VERSION", "ScaleResult", "csv_rows", "in_fit_text",
           "mean_text", "member_addresses", "partial_text", "precision_missed",
           "read_scale_result", "run_where"]

SCHEMA = "cachelab.scale"
SCHEMA_VERSION = 1
CSV_HEADER = ["order", "n", "repeat", "connections", "threads", "throughput", "replies",
              "window_s", "steady_reached", "window_short", "errors", "lost", "p50_ns", "p99_ns",
              "p99.9_ns", "max_ns", "server_run_queue_wait_per_wall", "client_cpu_us_per_op",
              "verdict"]


@dataclass
class ScaleResult:
    """A sweep: every run, a summary per N, the USL fit, and what limits the result; ``run``
    says whether it went to the end (``elapsed_s``; ``cancelled``: stopped by a signal;
    ``aborted``: why it gave up, e.g. the server went away) — a partial sweep keeps the runs
    it finished."""

    created: str
    spec: dict[str, Any]
    runs: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    fit: dict[str, Any] | None
    limits: list[str]
    server: dict[str, Any]
    environment: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)

    @property
    def usl(self) -> UslFit | None:
        """The fit as a :class:`~cachelab.usl.UslFit` (None when there were too few points)."""
        return None if self.fit is None else UslFit.from_dict(self.fit, "scale fit")

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict(), allow_nan=False)

    def csv_table(self) -> tuple[list[str], list[list[object]]]:
        """``scale.csv`` (and ``--format csv``): :data:`CSV_HEADER`, one row per run."""
        return CSV_HEADER, csv_rows(self)

    def write(self, out_dir: Path, *, plots: bool = True) -> list[Path]:
        """``scale.json``, ``scale.csv`` (one row per run) and, unless told not to,
        ``scale-usl.png``/``.svg`` (when there is a fit) and ``scale-latency.png``/``.svg`` in
        ``out_dir``."""
        written = write_json_and_csv(self, out_dir, "scale")
        if plots:
            # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
            from cachelab.scale.plots import write_plots

            written += write_plots(self.usl, self.summary, self.spec["vary"], out_dir)
        return written

    def answers(self) -> list[Answer]:
        """The answer card (:mod:`cachelab.answers`): the peak measured throughput with its
        interval and N, and where throughput stops rising (or why that is not known)."""
        d = self.to_dict()
        return scale_answers(d, partial_text(d))

    def render(self) -> str:
        """The human summary: throughput and latency per N, the USL fit, and the notes on
        what limits the result."""
        s = self.spec
        srv = self.server
        where = (f"through the proxy at {srv.get('address')} to {len(srv['behind'])} server(s) "
                 "behind it" if srv.get("proxy") else
                 f"on the Redis Cluster of {srv['cluster'].get('masters', '?')} masters "
                 f"seeded at {srv['cluster'].get('seed', srv.get('address'))}"
                 if srv.get("cluster") else
                 f"on a pool of {len(srv['pool']['members'])} at {srv.get('address')}"
                 if srv.get("pool") else f"at {srv.get('address')}")
        target = s.get("precision")
        window = (f"window {s['window']:g} s from the steady state" if target is None else
                  f"each run until its {target_percentile(s)} is within ±{100 * target:g} % "
                  f"(at most {s['settle'] + s['window']:g} s after the warm-up), measured from the "
                  "steady state to its end")
        layout = layout_text(srv.get("cpus"))
        lines = [
            f"scale sweep: N = {s['vary']}, {len(self.runs)} run(s) "
            f"({s['repeats']} repeat(s), interleaved), {window}; "
            + (f"{srv.get('version', '?')} {where}, resp protocol"
             + (f", io-threads {srv['io_threads']}" if srv.get("io_threads") else "")
             if srv.get("protocol") == "resp" else f"memcached {srv.get('version', '?')} {where}")
            + (f"; {layout}" if layout else ""),
        ]
        ceiling = ceiling_line(self.to_dict())
        missed = precision_missed(s, self.runs)
        # The headline tells the worst: runs left out of the fit, latencies not certified,
        # precision missed.
        partial = partial_text({"spec": s, "runs": self.runs, "run": self.run})
        lines[:0] = [*([partial] if partial else []), *behind_headline(self.behind_totals()),
                     *verdict_lines(s, self.runs), *([missed] if missed else []),
                     *([ceiling] if ceiling else [])]
        lines += ["", (f"{'N':>6}{'X mean /s':>14}{'sd':>10}{'in fit':>8}{'p50 µs':>10}"
                  f"{'p99 µs':>10}{'p99 95 % µs':>18}{'p99.9 µs':>10}  {'latencies':<18}"
                  + ("" if target is None
                     else f"{target_percentile(s) + ' ±, runs reached':>22}")).rstrip()]
        for row in self.summary:
            p = row["latency"]["percentiles_ns"]
            sd = row["throughput_sd"]
            lines.append((f"{row['n']:>6}{mean_text(row['throughput_mean']):>14}"
                         f"{'—' if sd is None else f'{sd:,.0f}':>10}{in_fit_text(row):>8}"
                         f"{us(p.get('50')):>10}{us(p.get('99')):>10}"
                         f"{p99_interval_text(row['latency'].get('p99_interval')):>18}"
                         f"{us(p.get('99.9')):>10}  "
                         f"{latency_verdict(self.runs, row['n']):<18}"
                         + ("" if target is None
                            else f"{point_precision_text(row.get('precision')):>22}")).rstrip())
        if self.summary:
            lines.append("X mean and sd: the runs in the USL fit ('in fit'; "
                         + ("--keep-invalid: every run that measured a throughput"
                            if self.spec.get("keep_invalid") else
                            "a run INVALID for its throughput is left out") + ")")
        lines += behind_lines(self.behind_totals(), "every run, warm-up included")
        lines += member_lines(self.member_totals(), srv)
        fit = self.usl
        if fit is not None:
            name = server_name({"server": srv})
            lines += ["", *([f"the load client's ceiling, not {name}'s (the client "
                             "saturated; see the first lines):"] if ceiling else []),
                      fit.render()]
        if self.limits:
            lines += ["", *[f"note: {m}" for m in self.limits]]
        return "\n".join(lines)

    def failed_checks(self) -> dict[str, str]:
        """The verdicts ``--fail-on`` can check that this sweep failed: ``invalid`` (a run's
        load verdict is INVALID), ``precision`` (a run did not reach ``--precision``)."""
        out = {}
        invalid = sorted({r["n"] for r in self.runs if r.get("verdict") == "INVALID"})
        if invalid:
            out["invalid"] = ("INVALID run(s) at N = " + ", ".join(str(n) for n in invalid))
        missed = precision_missed(self.spec, self.runs)
        if missed:
            out["precision"] = missed
        return out

    def problems(self) -> dict[str, int]:
        """Runs that had failed or lost requests (``runs[].errors``, ``lost``), by kind."""
        bad = sum(1 for r in self.runs if r["errors"] or r["lost"])
        return {"runs_with_errors": bad} if bad else {}

    def behind_totals(self) -> list[dict[str, Any]] | None:
        """Through a proxy: each server behind it with its ``stats`` deltas summed over every
        run (``runs[].behind``), in the shape of ``load.json``'s ``behind``; else None."""
        if not self.server.get("proxy"):
            return None
        # By host:port: a member given with its weight (host:port:2) is the same server
        # (a sweep saved before this keyed its list by what was given).
        totals: dict[str, dict[str, float]] = {
            a: {} for a in member_addresses(self.server.get("behind") or [])}
        stopped: dict[str, dict[str, Any]] = {}
        for run in sorted(self.runs, key=lambda r: r.get("order", 0)):
            for b in run.get("behind") or []:
                address = member_addresses([b["address"]])[0]
                into = totals.setdefault(address, {})
                for k, v in b["deltas"].items():
                    if isinstance(v, (int, float)):
                        into[k] = into.get(k, 0) + v
                if b.get("stopped") and address not in stopped:
                    stopped[address] = {**b["stopped"], "where": run_where(run)}
        return [{"address": a, "server": {"deltas": d},
                 **({"stopped": stopped[a]} if a in stopped else {})}
                for a, d in totals.items()]

    def member_totals(self) -> list[dict[str, Any]] | None:
        """On a pool or a Redis Cluster: each member's (master's) part of every run summed
        (``runs[].members``: replies, errors, a Redis's commands, a master's redirections),
        in the order first met; None for one server or a proxy."""
        totals: dict[str, dict[str, Any]] = {}
        for run in sorted(self.runs, key=lambda r: r.get("order", 0)):
            for m in run.get("members") or []:
                into = totals.setdefault(m["address"], {"address": m["address"], "replies": 0,
                                                        "errors": 0})
                into["replies"] += int(m.get("replies", 0))
                into["errors"] += int(m.get("errors", 0))
                if "commands" in m:
                    into["commands"] = into.get("commands", 0) + int(m["commands"])
                for k, v in (m.get("redirects") or {}).items():
                    into.setdefault("redirects", {"moved": 0, "ask": 0})
                    into["redirects"][k] = into["redirects"].get(k, 0) + int(v)
        return list(totals.values()) or None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "scale result") -> ScaleResult:
        check_schema(d, SCHEMA, SCHEMA_VERSION, "scale result", where)
        return from_fields(cls, d, where)


def read_scale_result(path: str | Path) -> ScaleResult:
    """A sweep saved as ``scale.json`` (or a directory holding one)."""
    path, data = read_json(path, "scale.json")
    return ScaleResult.from_dict(data, str(path))


def csv_rows(r: ScaleResult) -> list[list[object]]:
    """The rows of ``scale.csv`` (columns :data:`CSV_HEADER`), one per run in run order."""
    rows: list[list[object]] = []
    for x in sorted(r.runs, key=lambda x: x["order"]):
        p = x["latency"]["percentiles_ns"]
        wait = x["server_run_queue_wait_per_wall"]
        rows.append([x["order"], x["n"], x["repeat"], x["connections"], x["threads"],
                     f"{x['throughput']:.1f}", x["replies"], x["window_s"],
                     int(x["steady_reached"]), int(x["window_short"]), x["errors"], x["lost"],
                     p.get("50", ""), p.get("99", ""), p.get("99.9", ""), p.get("100", ""),
                     wait if wait is not None else "", x["client_cpu_us_per_op"] or "",
                     x.get("verdict", "")])
    return rows


def target_percentile(spec: Mapping[str, Any]) -> str:
    """The percentile a sweep's ``precision`` targets, as "p99" (a scale.json written before
    ``precision_percentile``: the p99)."""
    return f"p{spec.get('precision_percentile') or '99'}"


def precision_missed(spec: Mapping[str, Any], runs: list[dict[str, Any]]) -> str | None:
    """Under ``scale --precision``: "precision NOT reached in 3 of 12 run(s) (p99 within
    ±5 %): N = 1, 8" when some run did not reach it on its own; None otherwise."""
    target = spec.get("precision")
    missed = [r for r in runs if target is not None
              and not (r.get("precision") or {}).get("reached")]
    if not missed:
        return None
    fix = longer_fix("--window", float(spec.get("window") or missed[0]["precision"]["cap_s"]),
                     [r["precision"]["half_width"] for r in missed], float(target))
    return (f"precision NOT reached in {len(missed)} of {len(runs)} run(s) "
            f"({target_percentile(spec)} within "
            f"±{100 * target:g} %): N = " + ", ".join(str(n) for n in sorted({r["n"]
                                                                             for r in missed}))
            + f" → {fix}")


def partial_text(d: Mapping[str, Any]) -> str | None:
    """The :func:`~cachelab.units.partial_note` of a sweep cut short (``scale.json``'s
    ``run``), with the runs it kept of those asked: "PARTIAL (interrupted after 7.2 s; runs
    measured: 4 of 12 asked)"; None for a complete one (or one saved before ``run``)."""
    spec = d.get("spec") or {}
    asked = len(spec.get("points") or []) * int(spec.get("repeats") or 1)
    return partial_note(d.get("run"), "runs measured: "
                        + of_asked([len(d.get("runs") or [])], asked or None))


def mean_text(x: float | None) -> str:
    """A per-N mean throughput: "—" when no run at that N is in the fit."""
    return "—" if x is None else f"{x:,.0f}"


def in_fit_text(row: Mapping[str, Any]) -> str:
    """The runs a summary row's mean stands on, of its runs (``"2/3"``; "-" for a sweep
    saved before the mean left INVALID runs out)."""
    used = row.get("throughput_runs")
    return "-" if used is None else f"{used}/{row['runs']}"


def member_lines(members: list[dict[str, Any]] | None, server: Mapping[str, Any]) -> list[str]:
    """The table's rows for a pool's members or a cluster's masters (:meth:`ScaleResult.
    member_totals`): replies, errors, share of the replies; a Redis's commands as its INFO
    counted them (its own deltas, so the prefill's and clean-up's are not in them); a
    cluster master's MOVED and ASK."""
    if not members:
        return []
    cluster = server.get("cluster") is not None
    resp = any("commands" in m for m in members)
    kind = "master" if cluster else "member"
    lines = ["", f"each {kind}, every run (warm-up included; replies as the client counted "
             "them" + (", commands as its INFO counted them" if resp else "") + "):",
             f"{kind:24}{'replies':>12}{'errors':>8}{'share':>8}"
             + (f"{'commands':>12}" if resp else "")
             + (f"{'MOVED':>8}{'ASK':>8}" if cluster else "")]
    total = sum(m["replies"] for m in members) or 1
    for m in members:
        r = m.get("redirects") or {}
        lines.append(f"{m['address']:24}{m['replies']:>12,}{m['errors']:>8}"
                     f"{m['replies'] / total:>8.1%}"
                     + (f"{m.get('commands', 0):>12,}" if resp else "")
                     + (f"{r.get('moved', 0):>8}{r.get('ask', 0):>8}" if cluster else ""))
    return lines


def member_addresses(members: list[str] | tuple[str, ...]) -> list[str]:
    """Each member's ``host:port`` (``host:port[:weight]`` as given, the weight dropped): the
    key of its rows wherever its counts are shown. A member that does not parse is kept as
    it is."""
    out = []
    for m in members:
        try:
            out.append(parse_server(str(m)).address)
        except UsageError:
            out.append(str(m))
    return out


def run_where(run: Mapping[str, Any]) -> str:
    """Which run of a sweep, in words: "in run 3 (N = 2)"."""
    return f"in run {int(run.get('order', 0)) + 1} (N = {run.get('n')})"
