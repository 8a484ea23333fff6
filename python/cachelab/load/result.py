"""A load run's result, :class:`LoadResult` (schema ``cachelab.load`` v2, docs/load.md), and
everything made from it: ``load.json``, ``load.csv`` (one row per interval), ``load.hlog`` (an
HdrHistogram interval log), the latency-over-time plot, and the human summary."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cachelab.answers import Answer
from cachelab.artifacts import atomic_file, check_schema, from_fields, write_json
from cachelab.load.answers import load_answers
from cachelab.load.drill import drill_headline, drill_lines
from cachelab.load.lives import restart_text
from cachelab.load.precision import interval_lines, precision_text
from cachelab.load.probe import probe_errors as probe_errors_of
from cachelab.load.probe import probe_lines
from cachelab.load.repeats import repeat_lines
from cachelab.load.spec import OPS
from cachelab.load.timeline import stall_text
from cachelab.load.validity import headline, with_fix
from cachelab.tables import write_json_and_csv
from cachelab.units import us

__all__ = ["CSV_HEADER", "SCHEMA", "SCHEMA_VERSION", "LoadResult", "behind_headline",
           "behind_lines", "csv_rows", "hlog_text", "restart_lines", "stopped_notes",
           "stopped_text", "unused_notes", "validity_lines"]

SCHEMA = "cachelab.load"
SCHEMA_VERSION = 2

CSV_HEADER = ["index", "start_s", "duration_s", "warmup", "steady", "replies", "throughput",
              "get", "multiget", "set", "delete", "hits", "misses", "errors", "lost",
              "p50_ns", "p99_ns", "p99.9_ns", "max_ns",
              "uncorrected_p50_ns", "uncorrected_p99_ns", "uncorrected_p99.9_ns"]


@dataclass
class LoadResult:
    """A finished (or interrupted) load run: everything ``load.json`` holds."""

    created: str
    spec: dict[str, Any]
    mode: str  # "closed" or "open"
    intervals: list[dict[str, Any]]
    steady: dict[str, Any]  # the steady window: where it starts, ``window`` totals, ``short``
    totals: dict[str, Any]  # the headline: every interval after the warm-up
    all: dict[str, Any]  # over every interval, warm-up included
    server: dict[str, Any]
    client: dict[str, Any]
    schedule: dict[str, Any] | None
    run: dict[str, Any]
    #: Stretches when requests waited at least ``spec.stall_ms`` (see load/timeline.py).
    stalls: list[dict[str, Any]] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    #: A run from several machines (``load --ray``): each agent's node, clock offset, share,
    #: achieved vs intended rate, CPU and run-queue wait per op, verdict (docs/scale-out.md).
    #: None for a local run, whose load.json has no ``agents`` key.
    agents: dict[str, Any] | None = None
    #: A pool's settings and key skew, and each member's figures (None for one server: the
    #: record then has neither key). See docs/load.md, "Pools".
    pool: dict[str, Any] | None = None
    members: list[dict[str, Any]] | None = None
    #: Through a proxy: the servers behind it, each with its ``server`` section (deltas).
    behind: list[dict[str, Any]] | None = None
    #: The validity verdict (:mod:`cachelab.load.validity`): ``verdict``, ``reasons``,
    #: ``not_checked``, ``checks``. None in a load.json written before it existed.
    validity: dict[str, Any] | None = None
    #: ``load --precision``: the target, the p99's final half-width, whether it was reached
    #: and when (:func:`cachelab.load.precision.precision_verdict`); None without a target.
    precision: dict[str, Any] | None = None
    #: ``load --repeats N``: every repeat (``runs``, each with its whole record), the one
    #: shown (the highest p99), how the server was treated, and the comparison of the runs'
    #: spread with their intervals (:mod:`cachelab.load.repeats`); None for a single run.
    repeats: dict[str, Any] | None = None
    #: ``load --probe-rate``: the latency probe's rate, totals (with intervals), client
    #: figures and own verdict (:func:`cachelab.load.probe.probe_result`); None without one.
    probe: dict[str, Any] | None = None
    #: A failure drill (``--add``/``--remove``/``--fail``): its events, what was done to the
    #: private pool, and hit ratio, errors and p99 per interval
    #: (:func:`cachelab.load.drill.drill_summary`); None without one.
    drill: dict[str, Any] | None = None

    def latency(self, which: str = "best", scope: str = "totals") -> dict[str, Any]:
        """A histogram entry: ``corrected``, ``uncorrected``, or ``best`` (corrected in open
        loop, where it exists), over the measured run (``totals``), the steady window
        (``steady``) or every interval (``all``)."""
        src = {"totals": self.totals, "steady": self.steady.get("window") or self.totals,
               "all": self.all}[scope]
        if which == "best":
            which = "corrected" if src.get("corrected") else "uncorrected"
        return src[which]

    def failed_checks(self) -> dict[str, str]:
        """The verdicts ``--fail-on`` can check that this run failed, each with its reason:
        ``invalid`` (the validity verdict is INVALID), ``precision`` (``--precision`` not
        reached). Exit 0 either way unless asked: they are in the table's first lines."""
        out = {}
        v = self.validity or {}
        if v.get("verdict") == "INVALID":
            out["invalid"] = "the run is INVALID: " + "; ".join(
                with_fix(v, i) for i in range(len(v.get("reasons") or [])))
        if self.precision is not None and not self.precision.get("reached"):
            out["precision"] = precision_text(self.precision) or "precision NOT reached"
        return out

    def problems(self) -> dict[str, int]:
        """What ``--fail-on problems`` fails on (said on stderr either way): errors (the
        probe's included), lost requests, keys left behind, a missed rate. (An INVALID
        verdict is :meth:`failed_checks`' ``invalid``: it is said in the table's first line and in
        load.json.)"""
        probe_errors, probe_lost = probe_errors_of(self.probe)
        out = {
            "errors": sum(self.all["errors"].values()) + probe_errors,
            "lost_requests": int(self.all["lost"]) + probe_lost,
            "leftover_keys": int(self.run.get("leftover_keys", 0)),
            "user_items_lost": int(self.run.get("user_items_lost") or 0),
            "rate_not_held": int(bool(self.schedule and not self.schedule.get("held", True))),
            "agents_lost": len(self.run.get("agents_lost") or ()),
            "members_down": sum(len(m["down"]) for m in self.members or []),
            "servers_stopped_behind_the_proxy": sum(1 for b in self.behind or []
                                                    if b.get("stopped")),
            "servers_unused_behind_the_proxy": len(unused_notes(self.behind)),
            # another repeat's errors, lost requests, keys left behind … (the shown one's
            # are counted above)
            "repeats_with_problems": sum(
                1 for i, x in enumerate((self.repeats or {}).get("runs") or [])
                if i != self.repeats["shown"] and LoadResult.from_dict(x["result"]).problems()),
        }
        return {k: v for k, v in out.items() if v}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        # a plain run's record is as it was
        for k in ("agents", "pool", "members", "behind", "validity", "precision", "repeats",
                  "probe", "drill"):
            if d[k] is None:
                del d[k]
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **d}

    def save(self, path: Path) -> Path:
        return write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "load result") -> LoadResult:
        check_schema(d, SCHEMA, SCHEMA_VERSION, "load result", where)
        return from_fields(cls, d, where)

    def write(self, out_dir: Path, *, plots: bool = True) -> list[Path]:
        """``load.json``, ``load.csv``, ``load.hlog`` and, unless told not to, the
        latency-over-time plot (``load-latency.png``/``.svg``) in ``out_dir``."""
        written = write_json_and_csv(self, out_dir, "load")
        with atomic_file(out_dir / "load.hlog") as tmp:
            tmp.write_text(hlog_text(self))
        written.append(out_dir / "load.hlog")
        if plots and self.intervals:
            # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
            from cachelab.load.plots import latency_over_time

            written += latency_over_time(self, out_dir / "load-latency")
        return written

    def csv_table(self) -> tuple[list[str], list[list[object]]]:
        """``load.csv`` (and ``--format csv``): :data:`CSV_HEADER`, one row per interval."""
        return CSV_HEADER, csv_rows(self)

    def answers(self) -> list[Answer]:
        """The answer card (:mod:`cachelab.answers`): latency and throughput, each with its
        interval and trust mark."""
        return load_answers({"run": self.run, "validity": self.validity, "spec": self.spec,
                             "precision": self.precision, "totals": self.totals},
                            self.latency("best"))

    def render(self) -> str:
        """The human summary the CLI prints."""
        return "\n".join(_summary_lines(self))


def csv_rows(r: LoadResult) -> list[list[object]]:
    """The rows of ``load.csv`` (columns :data:`CSV_HEADER`): one per interval, with the
    corrected percentiles in open loop."""
    rows = []
    first = r.steady["start_index"]
    for pos, iv in enumerate(r.intervals):
        best = iv.get("corrected") or iv["uncorrected"]
        unc = iv["uncorrected"]["percentiles"]
        bp = best["percentiles"]
        rows.append([
            iv["index"], f"{iv['start_s']:.3f}", f"{iv['duration_s']:.3f}", int(iv["warmup"]),
            int(pos >= first), iv["replies"], f"{iv['throughput']:.1f}",
            *(iv["ops"][op] for op in OPS), iv["hits"], iv["misses"],
            sum(iv["errors"].values()), iv["lost"],
            bp["50"], bp["99"], bp["99.9"], bp["max"], unc["50"], unc["99"], unc["99.9"],
        ])
    return rows


def hlog_text(result: LoadResult) -> str:
    """The intervals as an HdrHistogram interval log (format 1.3): one tagged line per interval
    and histogram (``corrected`` in open loop, ``uncorrected`` always), timestamps in seconds
    from StartTime, the interval max in milliseconds, histograms in ns, V2 compressed base64."""
    start = float(result.run.get("started_unix", 0.0))
    human = datetime.fromtimestamp(start, timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")
    lines = [
        "#[Histogram log format version 1.3]",
        f"#[StartTime: {start:.3f} (seconds since epoch), {human}]",
        f"#[BaseTime: {start:.3f} (seconds since epoch)]",
        "#[Latencies in nanoseconds; Interval_Max in milliseconds]",
        '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"',
    ]
    for iv in result.intervals:
        for tag in ("corrected", "uncorrected"):
            h = iv.get(tag)
            if not h:
                continue
            lines.append(
                f"Tag={tag},{iv['start_s']:.3f},{iv['duration_s']:.3f},"
                f"{h['max'] / 1e6:.3f},{h['histogram']}"
            )
    return "\n".join(lines) + "\n"


# -- the human summary ------------------------------------------------------------------------


def _summary_lines(r: LoadResult) -> list[str]:
    s = r.spec
    srv = r.server
    lines = [
        *_partial_lines(r),
        *behind_headline(r.behind),
        *restart_lines(r),
        *drill_headline(r.drill),
        *validity_lines(r.validity),
        (f"through the proxy at {srv.get('address')} to {len(r.behind)} "
         f"{'' if srv.get('protocol') == 'resp' else 'memcached '}{srv.get('version', '?')}"
         if r.behind else
         # (a Redis's version says which: "redis 7.0.15", "valkey 8.0.1")
         f"{'' if srv.get('protocol') == 'resp' else 'memcached '}{srv.get('version', '?')} "
         f"at {srv.get('address')}")
        + (" (private)" if srv.get("private") else ""),
        f"{r.mode} loop, {s['connections']} connection(s) on {s['threads']} thread(s), "
        + (f"target {s['rate']:.0f}/s ({s['arrivals']})" if r.mode == "open"
           else f"pipeline {s['pipeline']}")
        + f"; keys {s['key_space']} {s['key_dist']}, values {s['value_size']}",
    ]
    lines += _totals_lines(r)
    lines += repeat_lines(r.repeats)
    lines += _member_lines(r)
    lines += drill_lines(r.drill, float(s["interval"]), us)
    lines += behind_lines(r.behind)
    lines += _stall_lines(r)
    lines += _problem_lines(r)
    lines += _steady_lines(r)
    lines += _server_lines(srv) + _lost_lines(r.run)
    lines += _client_lines(r)
    lines += _agent_lines(r)
    run = r.run
    lines.append(
        f"keys: {run['prefilled_keys']} prefilled, {run['deleted_keys']} deleted at the end"
        + (f", {run['leftover_keys']} COULD NOT be deleted" if run["leftover_keys"] else "")
    )
    return lines


def _partial_lines(r: LoadResult) -> list[str]:
    """A first line that says the numbers below are partial, and why; and one per pool
    member that was marked down."""
    run = r.run
    lines = []
    if run.get("aborted"):
        lines.append(f"PARTIAL ({run['elapsed_s']:.1f} s measured): {run['aborted']}")
    elif run.get("agents_lost"):
        lines += [f"PARTIAL: agent {a['agent']} on {a['node_ip']} was lost {a['at_s']:.1f} s "
                  f"into the run ({a['reason']}); the figures are the other agents'"
                  for a in run["agents_lost"]]
    elif run.get("cancelled"):
        lines.append(f"PARTIAL: interrupted after {run['elapsed_s']:.1f} s")
    for m in r.members or []:
        if m["down"]:
            failed = m["errors"].get("member_down", 0)
            lines.append(
                f"MEMBER DOWN: {m['address']} was marked down {len(m['down'])} time(s)"
                f"{_by_agents(m['down'])}, {m['down_s']:.2f} s in all (first from "
                f"{m['down'][0]['start_s']:.2f} s); " + _down_policy(r, failed))
    return lines


def _down_policy(r: LoadResult, failed: int) -> str:
    """What became of a down member's requests, by the run's ``on_member_down``."""
    if r.spec.get("on_member_down") == "remap":
        return (f"meanwhile its keys went to the other members (--on-member-down remap); "
                f"{failed} of its requests failed at once (member_down)")
    return f"{failed} of its requests failed at once (member_down), not remapped"


def _by_agents(episodes: list[dict[str, Any]]) -> str:
    """The agents that marked a member down (a run on Ray), as words; "" otherwise."""
    agents = sorted({e["agent"] for e in episodes if "agent" in e})
    return f" by agent(s) {', '.join(map(str, agents))}" if agents else ""


def _member_lines(r: LoadResult) -> list[str]:
    """A pool: a row per member and the pool's row (whole sending phase, warm-up
    included), its key skew, and every down episode."""
    if not r.members:
        return []
    pool = r.pool or {}
    lines = ["", f"pool of {len(r.members)} members ({pool.get('distribution')}), whole run "
             "including the warm-up; a member's requests are its parts (a multi-get split "
             "over the pool is one part per member)"]
    lines.append(f"{'member':24}{'keys':>9}{'sent':>10}{'replies':>10}{'errors':>8}{'lost':>7}"
                 f"{'p50 µs':>10}{'p99 µs':>10}{'max µs':>10}  down")
    for m in r.members:
        p = m["latency"]["percentiles"]
        down = f"{len(m['down'])}× {m['down_s']:.2f} s" if m["down"] else "-"
        lines.append(f"{m['address']:24}{m['keys']:>9}{m['sent']:>10}{m['replies']:>10}"
                     f"{sum(m['errors'].values()):>8}{m['lost']:>7}"
                     f"{us(p['50']):>10}{us(p['99']):>10}{us(p['max']):>10}  {down}")
    a = r.all
    p = (a.get("corrected") or a["uncorrected"])["percentiles"]
    lines.append(f"{'pool':24}{sum(m['keys'] for m in r.members):>9}{a['sent']:>10}"
                 f"{a['replies']:>10}{sum(a['errors'].values()):>8}{a['lost']:>7}"
                 f"{us(p['50']):>10}{us(p['99']):>10}{us(p['max']):>10}")
    for m in r.members:
        if m["errors"]:
            lines.append(f"  {m['address']} errors: "
                         + ", ".join(f"{k} {n}" for k, n in sorted(m["errors"].items())))
        for e in m["down"]:
            lines.append(f"  {m['address']} down {e['start_s']:.2f}–{e['end_s']:.2f} s "
                         + (f"(marked at {e['marked_s']:.2f} s) " if "marked_s" in e else "")
                         + (f"for agent {e['agent']} " if "agent" in e else "")
                         + f"({e['end_s'] - e['start_s']:.2f} s, {e['failures']} failures, "
                         f"{e['connections']} connection(s))"
                         + (", still down at the end" if e["open"] else ""))
    skew = pool.get("skew")
    if skew:
        lines.append(f"key skew: the hottest member, {skew['hottest']}, took {skew['share']:.1%} "
                     f"of the requests against a fair share of {skew['fair_share']:.1%} "
                     f"({skew['ratio']:.2f}×)")
    redirects = pool.get("redirects")
    if redirects is not None:  # a Redis Cluster: what each master redirected
        lines.append(f"cluster redirections: {redirects['moved']} MOVED, {redirects['ask']} ASK"
                     + "".join(f"; {m['address']} {m['redirects']['moved']} MOVED, "
                               f"{m['redirects']['ask']} ASK" for m in r.members
                               if any(m["redirects"].values())))
    return lines


def behind_lines(behind: list[dict[str, Any]] | None, over: str = "the run") -> list[str]:
    """Through a proxy: what each server behind it counted over ``over`` (its ``stats``
    deltas; the proxy spreads the keys, so the client sees only the proxy). ``behind``: the
    ``behind`` section of load.json (or profile.json): ``address`` and ``server.deltas``."""
    if not behind:
        return []
    resp = any("keyspace_hits" in b["server"]["deltas"] for b in behind)
    # memcached's stats, or a Redis's INFO (commands, keyspace hits and misses)
    names = (("total_commands_processed", "keyspace_hits", "keyspace_misses") if resp
             else ("cmd_get", "get_hits", "cmd_set"))
    heads = ("commands", "hits", "misses") if resp else names
    what = "INFO" if resp else "stats"
    lines = ["", f"behind the proxy, as each server counted ({what} deltas over {over}):",
             f"{'server':24}" + "".join(f"{h:>10}" for h in heads) + f"{'share':>8}"]
    counts = [[int(b["server"]["deltas"].get(n, 0)) for n in names] for b in behind]
    total = sum(c[0] for c in counts) or 1
    for b, c in zip(behind, counts):
        mark = stopped_text(b.get("stopped"))
        lines.append(f"{b['address']:24}" + "".join(f"{v:>10}" for v in c)
                     + f"{c[0] / total:>8.1%}" + (f"  {mark}" if mark else ""))
    return lines


def stopped_text(stopped: Mapping[str, Any] | None) -> str:
    """A behind row's mark for a server that stopped answering during the run
    (``behind[].stopped``): "stopped at 3.8 s" (and where, in a sweep); "" otherwise."""
    if not isinstance(stopped, Mapping):
        return ""
    where = f" {stopped['where']}" if stopped.get("where") else ""
    return f"stopped at {_seconds(stopped.get('at_s'))}{where}"


def behind_headline(behind: list[dict[str, Any]] | None) -> list[str]:
    """The headline's line for each server behind a proxy that stopped answering during the
    run (:func:`stopped_notes`, marked ``SERVER STOPPED``) or answered none of its GETs
    (:func:`unused_notes`, marked ``SERVER UNUSED``)."""
    return ([f"SERVER STOPPED: {note}" for note in stopped_notes(behind)]
            + [f"SERVER UNUSED: {note}" for note in unused_notes(behind)])


def unused_notes(behind: list[dict[str, Any]] | None) -> list[str]:
    """For each server behind a proxy that counted none of the run's GETs while another
    counted some: the proxy placed every key elsewhere, so the run measured the others alone.
    twemproxy's default hash (fnv1a_64) puts keys that differ only in their last characters
    close together on its ring: with cachelab's keys, 59 of 600 runs of 300 keys left one of two
    servers without any; none of 600 runs of 1,000 keys did (2026-11-29)."""
    gets = [_gets(b["server"]["deltas"]) for b in behind or []]
    if len(gets) < 2 or max(gets) == 0:
        return []
    fed = sum(g > 0 for g in gets)
    others = "the other server, so the run measured it" if fed == 1 else \
        f"{fed} other servers, so the run measured them"
    return [f"server {b['address']} behind the proxy answered none of the run's GETs: the "
            f"proxy placed every key on {others} alone; a --key-space of 1000 or more spreads "
            "the keys (twemproxy's default hash places keys that differ only at their end "
            "close together)"
            for b, g in zip(behind or [], gets) if g == 0 and not b.get("stopped")]


def _gets(d: Mapping[str, Any]) -> int:
    """The GETs a server behind a proxy counted: memcached's ``cmd_get``, or a Redis's
    keyspace hits and misses."""
    if "keyspace_hits" in d:
        return int(d.get("keyspace_hits", 0)) + int(d.get("keyspace_misses", 0))
    return int(d.get("cmd_get", 0))


def stopped_notes(behind: list[dict[str, Any]] | None) -> list[str]:
    """For each server behind a proxy that stopped answering during the run: "server A
    behind the proxy stopped answering at 3.8 s: its counts are up to then (...)"."""
    lines = []
    for b in behind or []:
        st = b.get("stopped")
        if not isinstance(st, Mapping):
            continue
        last = st.get("last_answer_s")
        counts = (f"its counts are up to then (its last answer, at {_seconds(last)})"
                  if last is not None else "no count of it could be kept (no answer from "
                  "the same process during the run)")
        where = f" {st['where']}" if st.get("where") else ""
        lines.append(f"server {b['address']} behind the proxy stopped answering at "
                     f"{_seconds(st.get('at_s'))}{where}: {counts}")
    return lines


def _seconds(v: Any) -> str:
    """A time in the run, "3.8 s" ("?" for one that is not a number)."""
    return f"{v:.1f} s" if isinstance(v, (int, float)) and not isinstance(v, bool) else "? s"


def _totals_lines(r: LoadResult) -> list[str]:
    """The headline: the whole measured run (every interval after the warm-up) — replies by
    operation, hits, misses, errors by kind and the percentiles, max included."""
    t = r.totals
    warm = r.spec.get("warmup") or 0
    lines = [
        f"measured: {t['duration_s']:.2f} s in {t['intervals']} interval(s)"
        + (f", after a {warm:g} s warm-up" if warm else "")
    ]
    lines += ["", f"{'':14}{'total':>12}{'per s':>12}"]
    lines.append(f"{'replies':14}{t['replies']:>12}{t['throughput']:>12.0f}")
    for op, n in t["ops"].items():
        if n:
            lines.append(f"  {op:12}{n:>12}{n / t['duration_s'] if t['duration_s'] else 0:>12.0f}")
    lines.append(f"{'hits':14}{t['hits']:>12}")
    lines.append(f"{'misses':14}{t['misses']:>12}")
    errors = t["errors"]
    lines.append(f"{'errors':14}{sum(errors.values()):>12}"
                 + (f"  ({', '.join(f'{k} {n}' for k, n in sorted(errors.items()))})"
                    if errors else ""))
    if t["lost"]:
        lines.append(f"{'lost':14}{t['lost']:>12}  (in flight on a connection that failed)")
    live = r.run.get("liveness") or {}
    if live.get("dead_s"):
        lines.append(
            f"no replies at all for {live['dead_s']:.2f} s ({len(live['dead_intervals'])} "
            f"interval(s)); {live['live_throughput']:.0f} replies/s over the "
            f"{live['live_s']:.2f} s the server answered")
    lines += ["", "latency (µs)      p50       p90       p99     p99.9       max"]
    for name in ("corrected", "uncorrected"):
        h = t.get(name)
        if not h:
            continue
        p = h["percentiles"]
        label = name if r.mode == "open" else "latency"
        ranges = (h.get("intervals") or {}).get("ranges") or {}
        tail = (h.get("intervals") or {}).get("tail") or {}
        lines.append(f"{label:14}" + "".join(
            f"{f'n/a ({tail[k]})' if k in ranges and ranges[k] is None else us(p[k]):>10}"
            for k in ("50", "90", "99", "99.9", "max")))
    lines += interval_lines(t, r.mode == "open")
    lines += probe_lines(r.probe, t, r.mode == "open")
    said = precision_text(r.precision)
    if said:
        lines.append(said)
    return lines


def _stall_lines(r: LoadResult) -> list[str]:
    """Every stall, in time order: when requests waited at least the stall threshold."""
    threshold = r.spec.get("stall_ms", 100)
    if not r.stalls:
        return [f"\nstalls (requests waiting {threshold:g} ms or more): none"]
    warm = r.spec.get("warmup") or 0
    lines = [f"\nstalls (requests waiting {threshold:g} ms or more): {len(r.stalls)}"]
    for st in r.stalls[:_STALLS_SHOWN]:
        lines.append("  " + stall_text(st) + (" [warm-up]" if st["end_s"] <= warm else ""))
    if len(r.stalls) > _STALLS_SHOWN:
        lines.append(f"  … and {len(r.stalls) - _STALLS_SHOWN} more (all in load.json)")
    if r.run.get("stalls_dropped"):
        lines.append(f"  {r.run['stalls_dropped']} more were counted but not kept")
    return lines


#: Stalls listed in the summary; load.json has them all.
_STALLS_SHOWN = 10


def _steady_lines(r: LoadResult) -> list[str]:
    """The steady-state window: extra information, with a warning when the run never became
    steady or the window covers less than half of it."""
    st = r.steady
    w = st.get("window")
    ivs = r.intervals
    if not w:
        return []
    start = ivs[st["start_index"]]["start_s"] if st["start_index"] < len(ivs) else 0.0
    if not st["reached"]:
        return ["\nWARNING: the run never reached a steady state (throughput and p50 kept "
                "changing); the figures cover all of the measured run"]
    p = (w.get("corrected") or w["uncorrected"])["percentiles"]
    line = (f"\nsteady state from {start:g} s ({w['duration_s']:.2f} s): {w['throughput']:.0f} "
            f"replies/s, p50 {us(p['50'])} µs, p99 {us(p['99'])} µs")
    if st.get("short"):
        line += ("\nWARNING: the steady window is less than half the measured run; the run "
                 "was not steady for most of it")
    return [line]


def _rate_fix(r: LoadResult) -> str:
    """What would let an open loop hold its rate: the verdict's fix for the rate (or late)
    check, else a rate a tenth below what the run achieved."""
    checks = (r.validity or {}).get("checks") or {}
    for name in ("rate", "late"):
        fix = (checks.get(name) or {}).get("fix")
        if fix:
            return str(fix)
    achieved = float(r.schedule["achieved_rate"])
    return f"`--rate {max(1.0, 0.9 * achieved):.0f}` (10 % below what the run achieved)"


def _problem_lines(r: LoadResult) -> list[str]:
    """Whether an open loop held its rate in every interval; errors and lost requests over the
    measured run (and the warm-up's, said apart)."""
    lines = []
    if r.schedule:
        sc = r.schedule
        behind = sc.get("intervals_behind") or []
        held = "held" if sc.get("held") else "NOT held"
        lines.append(
            f"\ntarget rate {sc['target_rate']:.0f}/s {held}: achieved {sc['achieved_rate']:.0f}/s"
            + (f", {len(behind)} interval(s) fell behind (from "
               f"{_interval_start(r, behind[0]):g} s)" if behind else "")
            + f", {sc['backlog_at_end']} due but unsent at the end"
            + (f", {sc['skipped_disconnected']} skipped while disconnected"
               if sc["skipped_disconnected"] else "")
            + ("" if sc.get("held") else " → " + _rate_fix(r))
        )
    t, a = r.totals, r.all
    errors, warm_errors = sum(t["errors"].values()), sum(a["errors"].values())
    if errors or t["lost"]:
        lines.append(
            f"\nerror rate {errors / max(1, t['sent']):.2%} of requests sent"
            + f"; requests lost in flight: {t['lost']}")
    if warm_errors > errors or a["lost"] > t["lost"]:
        lines.append(f"during the warm-up: {warm_errors - errors} error(s), "
                     f"{a['lost'] - t['lost']} request(s) lost")
    return lines


def _interval_start(r: LoadResult, index: int) -> float:
    return next((iv["start_s"] for iv in r.intervals if iv["index"] == index), 0.0)


def restart_lines(r: LoadResult) -> list[str]:
    """A line for each server that restarted during the run (the server, a pool member or a
    server behind a proxy): when, its pids, and which of its lives the counters cover."""
    servers = [(r.server.get("address") or "the server", r.server)]
    servers += [(m["address"], m["server"]) for m in r.members or []]
    servers += [(b["address"], b["server"]) for b in r.behind or []]
    return [restart_text(where, srv["restart"]) for where, srv in servers
            if srv.get("restart")]


def _server_lines(srv: Mapping[str, Any]) -> list[str]:
    """The server's counters' changes and its run-queue wait (over the lives whose counters
    are known when it restarted)."""
    lines = []
    d = srv.get("deltas") or {}
    conns = d.get("curr_connections", {})
    restart = srv.get("restart")
    label = (f"server ({restart['counted']}, pid {' -> '.join(map(str, restart['pids']))})"
             if restart else "server")
    if d and "keyspace_hits" in d:  # a Redis or Valkey: INFO's counters
        lines.append(f"\n{label}: {resp_counters(d)}")
    elif d:
        lines.append(
            f"\n{label}: get_hits +{d.get('get_hits', 0)}, get_misses +{d.get('get_misses', 0)}, "
            f"evictions +{d.get('evictions', 0)}, connections "
            f"{conns.get('before')}→{conns.get('after')}"
            f", CPU {d.get('rusage_user_s', 0) + d.get('rusage_system_s', 0):.2f} s"
        )
    sch = srv.get("schedstat")
    if sch:
        lines.append(
            f"server run-queue wait: {sch['run_queue_wait_s']:.3f} s over {sch['threads']} "
            f"threads ({sch['wait_per_wall']:.1%} of wall time)"
        )
    return lines


def resp_counters(d: Mapping[str, Any]) -> str:
    """A Redis's or Valkey's side of a run, from its ``INFO`` deltas ``d``: commands,
    keyspace hits and misses, evicted keys, clients before and after, CPU."""
    clients = d.get("connected_clients", {})
    return (f"commands +{d.get('total_commands_processed', 0)}, keyspace_hits "
            f"+{d.get('keyspace_hits', 0)}, keyspace_misses +{d.get('keyspace_misses', 0)}, "
            f"evicted_keys +{d.get('evicted_keys', 0)}, clients "
            f"{clients.get('before')}→{clients.get('after')}, CPU "
            f"{d.get('used_cpu_user_s', 0) + d.get('used_cpu_sys_s', 0):.2f} s")


def _lost_lines(run: Mapping[str, Any]) -> list[str]:
    """On a server cachelab did not start: the items it evicted during the run (see
    cachelab.capacity)."""
    lost = run.get("user_items_lost")
    return [f"the server evicted {lost:,} of its items during the run: the user's items "
            "lost"] if lost else []


def _agent_lines(r: LoadResult) -> list[str]:
    """A run from several machines: one line per agent, and who limited the run."""
    ag = r.agents
    if not ag:
        return []
    lines = [f"\nagents: {ag['requested']} ({ag['placement']}); {ag['verdict']}",
             "  agent  node             conns  intended   achieved  CPU µs/op  wait µs/op"
             "  clock ms  verdict"]
    for a in ag["list"]:
        intended = f"{a['intended_rate']:.0f}" if a.get("intended_rate") else "closed"
        if a["status"] == "lost":
            lines.append(f"  {a['agent']:>5}  {a['node_ip']:<15}  {a['connections']:>5}  "
                         f"{intended:>8}  {'-':>9}  {'-':>9}  {'-':>10}  "
                         f"{a['clock']['offset_ms']:>+8.2f}  {a['verdict']}")
            continue
        cpu, wait = a.get("cpu_us_per_op"), a.get("run_queue_wait_us_per_op")
        lines.append(f"  {a['agent']:>5}  {a['node_ip']:<15}  {a['connections']:>5}  "
                     f"{intended:>8}  {a['achieved_rate']:>9.0f}  "
                     f"{'-' if cpu is None else f'{cpu:.2f}':>9}  "
                     f"{'-' if wait is None else f'{wait:.2f}':>10}  "
                     f"{a['clock']['offset_ms']:>+8.2f}  {a['verdict']}")
    return lines


def validity_lines(v: Mapping[str, Any] | None) -> list[str]:
    """The verdict (first line of the table) and, when INVALID, every further reason."""
    first = headline(v)
    if not first or v is None:
        return []
    return [first] + [f"  also: {with_fix(v, i)}" for i in range(1, len(v["reasons"]))]


def _saturated(r: LoadResult) -> bool:
    """Whether the verdict's client check found the load client saturated."""
    checks = (r.validity or {}).get("checks") or {}
    return (checks.get("client") or {}).get("status") == "fail"


def _client_behind(r: LoadResult) -> str:
    """What the client-queueing line adds: the client saturated, sends late, or nothing."""
    checks = (r.validity or {}).get("checks") or {}
    if _saturated(r):
        return " — CLIENT SATURATED: the CLIENT could not keep up"
    if (checks.get("late") or {}).get("status") == "fail":
        return " — the CLIENT could not keep up, or its connections were full"
    return ""


def _client_lines(r: LoadResult) -> list[str]:
    """The client's CPU and run-queue wait per reply, its writes, and busy polling."""
    lines = []
    c = r.client
    if c.get("cpu_us_per_op") is not None:
        whole = c.get("process_cpu_us_per_op")
        verdict = c.get("verdict_cpu_s")
        lines.append(f"client CPU: {c['cpu_us_per_op']:.2f} µs per reply in the load threads"
                     + (f", {whole:.2f} in the whole process" if whole is not None else "")
                     + (f"; the verdict {verdict:.2f} s (its statistics libraries' import "
                        "included)" if verdict is not None else ""))
    busy = c.get("busy")
    if busy:
        lines.append(f"client threads busy (on a CPU or waiting for one): {busy['share']:.0%} of "
                     f"their wall time ({busy['threads']} thread(s))"
                     + (" — CLIENT SATURATED" if _saturated(r) else
                        " (busy polling)" if r.spec.get("busy_poll_us") else ""))
    if c.get("run_queue_wait_us_per_op") is not None:
        lines.append(f"client threads waited for a CPU: {c['run_queue_wait_us_per_op']:.2f} µs "
                     f"per reply (slept {c['sleeps']}, preempted {c['preempted']} times)")
    if c.get("requests_per_write"):
        lines.append(f"writes: {c['writes']}, {c['requests_per_write']:.2f} requests per write"
                     + (f" (send batch {r.spec['send_batch']})"
                        if r.spec.get("send_batch", 1) > 1 else ""))
    q = c.get("queueing")
    if q:
        late = q["late_sends"]
        lines.append(f"client queueing (intended → actual send): p50 {us(q['p50_ns'])} µs, "
                     f"p99 {us(q['p99_ns'])} µs, max {us(q['max_ns'])} µs; {late} send(s) "
                     f"{q['late_threshold_ns'] / 1e6:g} ms or more late" + _client_behind(r))
    if c.get("busy_polls"):
        lines.append(f"busy polling: {c['busy_polls']} polls before sleeping, "
                     f"{c['busy_caught']} ended by a reply or the timer")
    if c.get("spins"):
        lines.append(f"pacing: {c['pacing_s']:.3f} s of the threads' CPU spent waiting awake "
                     f"for sends due ({c['spins']} waits; --spin-us "
                     f"{r.spec.get('spin_us')}), not counted as the client's work")
        if c.get("spin_sends") or c.get("spin_fallbacks"):
            lines.append(f"sent by the spin at their due time: {c['spin_sends']} request(s); "
                         f"left to their connection (a write that would block, or the "
                         f"connection came first): {c.get('spin_fallbacks', 0)}")
    return lines
