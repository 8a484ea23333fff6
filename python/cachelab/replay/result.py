"""What ``replay`` found (:class:`ReplayResult`): the artifacts it writes (``replay.json``,
schema :data:`SCHEMA` version :data:`SCHEMA_VERSION`, and ``replay.csv``) and the human
table (:func:`render`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cachelab.answers import Answer
from cachelab.artifacts import write_json
from cachelab.replay.answers import replay_answers
from cachelab.replay.calibrate import TERMS
from cachelab.replay.compare import PERCENTILES, TOLERANCE, pkey
from cachelab.tables import text_table, write_json_and_csv
from cachelab.units import of_asked, partial_note, pct

__all__ = ["CSV_COLUMNS", "SCHEMA", "SCHEMA_VERSION", "ReplayResult", "failure", "partial_text",
           "render"]

SCHEMA = "cachelab.replay"
SCHEMA_VERSION = 2

#: The columns of ``replay.csv``: one row per strategy and percentile.
CSV_COLUMNS = ("strategy", "percentile", "measured_ms", "predicted_ms", "error_ms",
               "in_memcached_ms", "in_memcached_shuffled_ms", "model_ms", "error_in_memcached",
               "library_ms", "predicted_library_ms", "error_library", "measured_increase",
               "predicted_increase", "error_increase")


@dataclass
class ReplayResult:
    created: str
    trace: dict[str, Any]
    spec: dict[str, Any]
    server: dict[str, Any]
    profile: dict[str, Any]
    strategies: list[dict[str, Any]]
    elapsed_s: float = 0.0
    environment: dict[str, Any] = field(default_factory=dict)
    #: The 1-, 5- and 15-minute load averages before and after the run.
    load_average: dict[str, Any] = field(default_factory=dict)
    #: The CPU other processes used during the run, in cores (``others_cores``,
    #: ``steal_cores``, ``busy``): :func:`cachelab.environment.other_cpu`; None off Linux.
    machine: dict[str, Any] | None = None
    #: Whether it went to the end: ``elapsed_s``, ``cancelled`` (stopped by a signal),
    #: ``aborted`` (why it gave up: the server failed) and ``slices`` (``done`` of ``asked``);
    #: cut short, the strategies are compared over the slices every one of them finished.
    run: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    def save(self, path: Path) -> Path:
        """``replay.json`` at ``path``."""
        return write_json(path, self.to_dict())

    def csv_rows(self) -> list[list[Any]]:
        """The rows of ``replay.csv`` (:data:`CSV_COLUMNS`)."""
        rows = []
        for s in self.strategies:
            for k in s["added_ms"]:
                a, i, m = s["added_ms"][k], s["increase"][k], s["memcached_ms"][k]
                b = s["library_ms"][k]
                rows.append([s["strategy"], k, a["measured"], a["predicted"], a["error"],
                             m["measured"], m.get("calls_shuffled"), m["predicted"], m["error"],
                             b["measured"], b["predicted"], b["error"],
                             i["measured"], i["predicted"], i["error"]])
        return rows

    def csv_table(self) -> tuple[tuple[str, ...], list[list[Any]]]:
        """``replay.csv`` (and ``--format csv``): :data:`CSV_COLUMNS` and :meth:`csv_rows`."""
        return CSV_COLUMNS, self.csv_rows()

    def write(self, out_dir: Path) -> list[Path]:
        """Every artifact of the run into ``out_dir`` (made if missing): ``replay.json`` and
        ``replay.csv``. Returns their paths."""
        return write_json_and_csv(self, Path(out_dir), "replay")

    def render(self) -> str:
        """The human table (:func:`render`)."""
        return render(self)

    def answers(self) -> list[Answer]:
        """The answer card: each strategy's measured added time with its interval against
        the prediction, the best one measured, and whether the replay confirms the
        prediction (:func:`~cachelab.replay.answers.replay_answers`)."""
        return replay_answers(self.to_dict(), failure(self.strategies))

    @property
    def within_tolerance(self) -> bool:
        return all(s["within_tolerance"] for s in self.strategies)

    def failed_checks(self) -> dict[str, str]:
        """``replay``: the prediction missed the measured added time (:meth:`failure`), the
        check ``--fail-on replay`` makes (a run cut short compares what it finished)."""
        failed = self.failure()
        return {"replay": failed} if failed else {}

    def failure(self) -> str | None:
        """Why the replay's check failed, in one line (:func:`failure`), with the machine's
        state when it was busy; None when it passed."""
        failed = failure(self.strategies)
        busy = self.busy()
        return f"{failed} — {busy}" if failed and busy else failed

    def busy(self) -> str | None:
        """``"machine busy: …"`` when other processes used more than
        :data:`~cachelab.environment.BUSY_CORES` during the run, else None."""
        m = self.machine or {}
        if not m.get("busy"):
            return None
        return (f"machine busy: other processes used {m['others_cores']:.2f} of {m['cores']} "
                f"cores during the replay (steal {m['steal_cores']:.2f}); the comparison is "
                "unreliable")


def failure(strategies: list[dict[str, Any]]) -> str | None:
    """The replay's check in one line when it failed, None when it passed: for each strategy
    whose predicted added time missed the measured one by more than :data:`TOLERANCE` at p50,
    p90 or p99, the worst percentile with both numbers — ``"prediction off by more than 15 %:
    lru:20 p50 0.412 ms predicted vs 0.335 ms measured (+23 %)"``. Why ``replay`` exits 1,
    and why ``run`` marks its replay step failed."""
    parts = []
    for s in strategies:
        if s.get("within_tolerance", True):
            continue
        k, a = max(s["added_ms"].items(), key=lambda kv: _miss(kv[1]["error"]))
        off = "measured 0" if a["error"] is None else f"{100 * a['error']:+.0f} %"
        parts.append(f"{s['strategy']} p{k} {a['predicted']:.3f} ms predicted vs "
                     f"{a['measured']:.3f} ms measured ({off})")
    if not parts:
        return None
    return f"prediction off by more than {pct(TOLERANCE, 0)}: " + "; ".join(parts)


def _miss(error: float | None) -> float:
    """How far off a percentile is, as the check counts it (no measured time: fully off)."""
    return 1.0 if error is None else abs(error)


def partial_text(d: dict[str, Any]) -> str | None:
    """The :func:`~cachelab.units.partial_note` of a replay cut short (``replay.json``'s
    ``run``), with the evaluated requests it compared of those asked and its slices: "PARTIAL
    (interrupted after 9.1 s; requests replayed: 500 of 1,000 asked, 2 of 4 slices)"; None
    for a complete one."""
    run = d.get("run") or {}
    trace = d.get("trace") or {}
    done = trace.get("evaluated", 0)
    slices = run.get("slices") or {}
    text = ("requests replayed: " + of_asked([done], trace.get("evaluated_asked", done))
            + (f", {slices.get('done')} of {slices.get('asked')} slices" if slices else ""))
    return partial_note(run, text)


def term_cell(t: dict[str, Any], name: str) -> str:
    """A term's mean predicted ms per request, with its unit cost and count."""
    u, c, mm = t["unit_us"], t["per_request"], t["mean_ms"]
    if name == "prefetch":
        if "prefetch" not in u:
            return f"{mm['prefetch']:.3f}"
        return (f"{mm['prefetch']:.3f} ({u['prefetch']:.1f}+{u['prefetch_walk']:.2f}/node"
                f"+{u['prefetch_key']:.2f}/key+{u['prefetch_call']:.1f})")
    first = {"l1_hit": "l1_first", "get": "get_first"}.get(name)
    if first in u:
        return (f"{mm[name]:.3f} ({u[first]:.2f} first+{u[name]:.2f}/more;"
                f" {c.get(name, 1.0):.1f}/req)")
    return f"{mm[name]:.3f} ({u[name]:.2f}x{c.get(name, 1.0):.1f})"


def render(result: ReplayResult) -> str:
    """Measured vs predicted, side by side, and where the time goes, for a terminal."""
    d = result.to_dict()
    load = d.get("load_average") or {}
    failed = result.failure()
    partial = partial_text(d)
    lines = [partial] if partial else []
    if partial and not d["strategies"]:
        lines.append("no strategy was compared: the replay stopped before a slice was done")
    lines += [f"CHECK FAILED: {failed}", ""] if failed else []
    busy = result.busy()
    if busy and not failed:
        lines += ["MACHINE BUSY" + busy[len("machine busy"):], ""]
    lost = d["server"].get("user_items_lost")
    if lost:
        lines += [f"the server evicted {lost:,} of its items during the replay: the user's "
                  "items lost", ""]
    lines += [
        f"Added time per request: measured on the real tiered cache vs predicted "
        f"({d['trace']['evaluated']:,} evaluated requests on {d['server']['address']}; "
        f"load average before {load.get('before')}, after {load.get('after')})",
        "",
    ]
    header = ["strategy", "%ile", "measured ms", "95% CI", "predicted ms", "error",
              "in memcached ms",
              "shuffled", "model ms", "error", "library ms", "predicted", "inc measured",
              "inc predicted", "error"]
    rows = []

    def err(e: float | None) -> str:
        return "—" if e is None else f"{100 * e:+.1f}%"

    for s in d["strategies"]:
        for k in (pkey(p) for p in PERCENTILES):
            a, i, m, b = (s["added_ms"][k], s["increase"][k], s["memcached_ms"][k],
                          s["library_ms"][k])
            ci = a.get("measured_ci95")
            ci_cell = (f"{100 * (ci[0] / a['measured'] - 1):+.0f}/"
                       f"{100 * (ci[1] / a['measured'] - 1):+.0f}%"
                       if ci and a["measured"] > 0 else "—")
            rows.append([s["strategy"] if k == "50" else "", f"p{k}", f"{a['measured']:.3f}",
                         ci_cell, f"{a['predicted']:.3f}", err(a["error"]),
                         f"{m['measured']:.3f}",
                         f"{m['calls_shuffled']:.3f}" if "calls_shuffled" in m else "—",
                         f"{m['predicted']:.3f}", err(m["error"]), f"{b['measured']:.3f}",
                         f"{b['predicted']:.3f}", f"{100 * i['measured']:.2f}%",
                         f"{100 * i['predicted']:.2f}%", err(i["error"])])
    lines += text_table(header, rows, left=2)
    lines += ["", "measured = the request's wall time in the tiered cache; predicted = the "
              "simulator's memcached time (model: a profile measured through the tiered "
              "cache's own L2 call, with this strategy's think times) + the library terms "
              "below; in memcached = the part inside L2 calls vs the model alone; shuffled = "
              "the same calls dealt out to requests at random (what independent draws can "
              "reproduce at best); library = the rest vs the terms; inc = added time / the "
              "request's base latency. error = (predicted - measured) / measured. 95% CI = "
              "the measured percentile's bootstrap interval over the evaluated requests, "
              "relative to it: the measurement's own uncertainty."]
    lines += ["", "Where the time goes (mean per request, predicted ms; unit cost µs x count "
              "per request):"]
    th = ["strategy", "memcached", *[t for t, _ in TERMS], "predicted", "measured",
          "think p50/p90 µs (CPU)"]
    trows = []
    for s in d["strategies"]:
        t = s["terms"]
        mm = t["mean_ms"]

        th_us = s.get("think_us", {})
        trows.append([s["strategy"], f"{mm['memcached']:.3f}",
                      *[term_cell(t, n) for n, _ in TERMS],
                      f"{mm['total']:.3f}", f"{t['measured_mean_ms']['total']:.3f}",
                      f"{th_us.get('p50', 0):.0f}/{th_us.get('p90', 0):.0f} "
                      f"({th_us.get('cpu_p50', 0):.0f}/{th_us.get('cpu_p90', 0):.0f})"])
    lines += text_table(th, trows, left=2)
    lines += ["", "Terms: " + "; ".join(f"{n} = {what}" for n, what in TERMS) + ". Unit costs "
              "are measured by calibration requests in this process (not fitted to the "
              "replay); measured = the replay's mean wall time per request."]
    lines += ["", "Draws within a request (how one memcached call's latency relates to the "
              "next's):"]
    for s in d["strategies"]:
        dr = s.get("draws") or {}
        lag = dr.get("lag1")
        what = ("consecutive ranks of the profile's samples in the order taken" if
                dr.get("used") == "sequence" else "independent")
        line = f"  {s['strategy']}: {what}"
        if lag is not None:
            line += f" (lag-1 rank correlation of the profile's samples {lag:.2f})"
        alt = s.get("alternative")
        if alt:
            other = "independent" if dr.get("used") == "sequence" else "sequence"
            line += (f"; with {other} draws the errors would be "
                     + ", ".join(f"p{k} {err(alt[k]['increase_error'])}" for k in
                                 (pkey(p) for p in PERCENTILES)))
        lines.append(line)
    lines += ["", "Checks (must agree: the replay mirrors the simulator's semantics):"]
    for s in d["strategies"]:
        c = s["checks"]
        lines.append(
            f"  {s['strategy']}: L1 hit ratio {c['hit_ratio']['measured']:.4f} vs "
            f"{c['hit_ratio']['predicted']:.4f}; round trips/request "
            f"{c['round_trips_per_request']['measured']:.3f} vs "
            f"{c['round_trips_per_request']['predicted']:.3f} (requests that differ: "
            f"{c['round_trips_differ_in_requests']}); loader keys {c['loader_keys']}; "
            f"errors {c['errors']}; library {100 * s['library_overhead_share']:.0f}% of added "
            f"time; added ms within ±{TOLERANCE:.0%} at p50/p90/p99: "
            f"{'yes' if s['within_tolerance'] else 'NO'}")
    return "\n".join(lines)
