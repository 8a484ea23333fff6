"""A profile's human report (what ``cachelab profile`` prints): a header, the loopback floor,
and per operation a percentile table with its samples and ``p50/floor`` rows, laid out like
the appendix of Khan Academy's "Profiling App Engine Memcached".

The functions take a :class:`~cachelab.profile.model.LatencyProfile` (whose ``render`` calls
them; so this module does not import it)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from cachelab.load import behind_lines, restart_text
from cachelab.profile.cell import OPS, floor_p50, interval_text, shown_percentiles
from cachelab.profile.precise import precision_line, precision_percentile, precision_text
from cachelab.profile.resp import server_lines
from cachelab.profile.tlscost import render_tls_cost
from cachelab.tables import percentile_table
from cachelab.units import (
    PARTIAL,
    format_duration_ns,
    format_size,
    of_asked,
    partial_note,
    pick_unit,
)

#: The percentiles whose 95 % interval the tables show under their samples.
CI_ROWS = ("50", "99")

#: The printed tables' titles.
TABLE_TITLES = {
    "get": "Get latency by value size",
    "set": "Set latency by value size",
    "multiget": "Multi-get latency by key count",
}


def render_profile(p: Any) -> str:
    """The report of the latency profile ``p``; an interrupted one says so on its first line
    (with the samples each cell really has) and over every table."""
    note = partial(p.run, p.client.get("samples"), (c.samples for c in p.cells))
    lines = [note] if note else []
    # a server behind the proxy restarted: its counters below are per life (the headline
    # tells the worst)
    lines += [restart_text(b["address"], b["server"]["restart"]) for b in p.behind or []
              if b["server"].get("restart")]
    said = precision_line(p.precision, p.cells)
    if said and "NOT" in said:  # the headline tells the worst
        lines.append(said)
    lines.append(heading(p))
    floor, floor_ns = p.floor, floor_p50(p.cells)
    if floor and floor_ns:
        unit = pick_unit([floor_ns])
        fl = floor.percentiles
        lines.append(
            f"{floor_words(p.client.get('floor_command'), p.server.get('transport'))}: "
            f"p50 {format_duration_ns(fl['50'], unit)} {unit}, "
            f"p99 {format_duration_ns(fl['99'], unit)} {unit}, "
            f"max {format_duration_ns(fl['max'], unit)} {unit}"
        )
    for op in OPS:
        cells = p.cells_of(op)
        if not cells:
            continue
        title = TABLE_TITLES[op] if note is None else f"{PARTIAL}: {TABLE_TITLES[op]}"
        if op == "multiget":
            title += f", {format_size(cells[0].value_size)} values"
        footer = [("samples", [str(c.samples) for c in cells])]
        if any(c.intervals for c in cells):
            footer += [(f"p{row} 95% CI", [interval_text(c, row) for c in cells])
                       for row in CI_ROWS]
        if any(c.precision for c in cells):
            footer.append((f"p{precision_percentile(p.precision)} precision",
                           [precision_text(c) for c in cells]))
        if floor_ns:
            footer.append(("p50/floor", [
                f"{c.percentiles['50'] / floor_ns:.2f}x" if c.samples else "—" for c in cells
            ]))
        if any(c.errors for c in cells):
            footer.append(("errors", [str(sum(c.errors.values())) for c in cells]))
        if any(c.mismatches or c.misses for c in cells):
            footer.append(("mismatches", [str(c.mismatches) for c in cells]))
            footer.append(("misses", [str(c.misses) for c in cells]))
        lines += ["", percentile_table(title, list(iter_table_columns(p, op)), footer=footer)]
    if any(c.intervals for c in p.cells):
        lines += ["", "CI: the 95 % interval of a percentile, relative to it (order statistics, "
                  "the samples assumed independent: each is a fresh key, taken interleaved "
                  "with the other cells'; not tested); n/a (k): too few samples beyond that "
                  "percentile to give one (k of them)."]
    if said and "NOT" not in said:
        lines += ["", said]
    errors: dict[str, int] = {}
    for c in p.cells:
        for k, n in c.errors.items():
            errors[k] = errors.get(k, 0) + n
    if errors:
        lines += ["", "errors by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(errors.items()))]
    if p.run.get("leftover_keys"):
        lines.append(f"keys that could not be deleted: {p.run['leftover_keys']}")
    if p.server.get("protocol") == "resp":
        lines += ["", *server_lines(p.server, p.client)]
    lines += behind_lines(p.behind, "the whole profile, warm-up and clean-up included")
    if p.tls_cost:
        lines += ["", *render_tls_cost(p.tls_cost)]
    return "\n".join(lines)


def floor_words(command: str | None, transport: str | None) -> str:
    """What the floor was: ``loopback floor (mn on the measuring connection)``; through a
    proxy, a get of a key never written (``get-miss``), which crosses the proxy to one server
    behind it. The floor goes on the connection that carries every sample (same socket, same
    server thread, same client), timed right after an untimed one as a get is after its set."""
    where = f"on the measuring {_transport_word(transport)}connection"
    if command in ("get-miss", "GET-miss"):  # GET-miss: over RESP (the proxy answers PING)
        return (f"floor ({command}: a {command[:3]} of a key never written, through the proxy "
                f"to the one server behind it that the key maps to, {where})")
    return f"loopback floor ({command or 'mn'} {where})"


def _transport_word(transport: str | None) -> str:
    """The floor's transport (the samples'), as a word before "connection": ``TLS ``,
    ``Unix ``, or nothing for TCP."""
    return {"tls": "TLS ", "unix": "Unix "}.get(transport or "", "")


def heading(p: Any) -> str:
    """The report's heading: where the profile comes from (the server and how it was
    measured, or the publication)."""
    if p.source == "published":
        return f"{p.name}: {p.published.get('source', '') if p.published else ''}"
    srv, c = p.server, p.client
    settings = srv.get("settings") or {}
    facts = [f"{settings['num_threads']} threads"] if "num_threads" in settings else []
    if "maxbytes" in settings:
        facts.append(f"{int(settings['maxbytes']) // 2**20} MB")
    resp = srv.get("protocol") == "resp"
    if resp:  # a Redis or Valkey: CONFIG GET's settings, where it answered
        if "maxmemory" in settings:
            limit = int(settings["maxmemory"])
            facts.append(f"maxmemory {limit // 2**20} MB" if limit else "no maxmemory")
        facts += [f"{settings['maxmemory-policy']}"] if "maxmemory-policy" in settings else []
        facts += ([f"io-threads {settings['io-threads']}"] if "io-threads" in settings
                  else [])
    if srv.get("private"):
        facts.insert(0, "private")
    where = (srv.get("address") or "—") + (f" ({', '.join(facts)})" if facts else "")
    if srv.get("proxy"):
        where = (f"the proxy at {where} to {len(srv.get('behind') or [])} server(s) behind "
                 "it")
    return (
        f"{'' if resp else 'memcached '}{srv.get('version', '?')} "
        f"{'through' if srv.get('proxy') else 'at'} "
        f"{where}; {c.get('protocol')} protocol, "
        f"{c.get('concurrency')} connection(s), "
        f"{samples_per_cell(c.get('samples'), (cell.samples for cell in p.cells), c.get('warmup'))}"
    )


def samples_per_cell(asked: int | None, counts: Iterable[int],
                     warmup: int | None = None) -> str:
    """The samples the cells hold: ``"10000 samples per cell"`` when every cell has what was
    asked, else the real counts against it (``"samples per cell: 1,372–10,000 of 10,000
    asked"``) — a run cut short must not look like it took them all; with ``warmup``, the
    warm-up samples discarded before them."""
    counts = list(counts)
    after = "" if warmup is None else f" after {warmup} warm-up"
    if asked is not None and counts and all(n == asked for n in counts):
        return f"{asked} samples per cell{after}"
    return f"samples per cell: {of_asked(counts, asked)}" + (f",{after}" if after else "")


def partial(run: Mapping[str, Any], asked: int | None, counts: Iterable[int]) -> str | None:
    """The profile's :func:`~cachelab.units.partial_note` (with its cells' real sample
    counts), or None when it ran to the end. ``counts``: every cell's samples, the floor's
    too."""
    return partial_note(run, samples_per_cell(asked, counts))


def iter_table_columns(p: Any, op: str) -> Iterator[tuple[str, dict[str, float | str]]]:
    """The columns of ``op``'s table: each cell's label and percentiles (empty when the cell
    has no samples; ``"n/a (k)"`` for one its samples cannot pin down)."""
    for c in p.cells_of(op):
        yield c.label, shown_percentiles(c)
