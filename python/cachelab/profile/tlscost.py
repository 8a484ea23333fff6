"""What TLS costs, measured beside a profile run over TLS: the ``tls_cost`` of profile.json.

* **New connection**: ``connections`` times over, connect (and the TLS handshake) to the first
  reply of the floor's command (``mn`` or ``version``), each connection closed before the next.
  A handshake alone is not timed: the server has not checked the client's last handshake
  message until it answers something, so the first reply is where a connection is ready.
* **Per request**: the floor and a get of :data:`REQUEST_SIZE` bytes, the same small profile
  over TLS and over plain TCP, in alternating blocks so drift touches both alike.

Plain TCP needs a plain listener of the same server (memcached ``-l notls:HOST:PORT``),
``ProfileSpec.plain_port``; without it the TLS figures stand alone and the table says so.
"""

from __future__ import annotations

from typing import Any

import cachelab._core as _core
from cachelab.profile.spec import ProfileSpec
from cachelab.tables import text_table
from cachelab.tls import core_tls
from cachelab.units import dur

__all__ = ["REQUEST_SIZE", "measure_tls_cost", "render_tls_cost", "tls_cost_rows"]

#: The value size of the per-request comparison (a small get: where TLS weighs most).
REQUEST_SIZE = 100
#: The per-request comparison runs this many blocks per transport, alternating.
BLOCKS = 2
_PCTS = (50.0, 90.0, 99.0)


def _summary(histogram: str) -> dict[str, Any]:
    p50, p90, p99 = _core.hist_percentiles(histogram, list(_PCTS))
    s = _core.hist_summary(histogram)
    return {"count": int(s["count"]), "mean_ns": round(float(s["mean"]), 1), "p50_ns": p50,
            "p90_ns": p90, "p99_ns": p99, "histogram": histogram}


def _request_spec(spec: ProfileSpec, address: str, tls: dict[str, Any] | None,
                  samples: int, warmup: int, seed: int) -> dict[str, Any]:
    return spec.to_core(address, seed=seed, sizes=[REQUEST_SIZE], key_counts=[],
                        multi_value_size=1, samples=samples, warmup=warmup, concurrency=1,
                        tls=tls)


def measure_tls_cost(spec: ProfileSpec, address: str) -> dict[str, Any]:
    """The ``tls_cost`` record of a profile over TLS at ``address`` (see the module)."""
    tls = core_tls(spec.tls)
    host = address.rsplit(":", 1)[0]
    plain = f"{host}:{spec.plain_port}" if spec.plain_port is not None else None
    n = spec.tls_cost_connections
    timeouts = {"connect_timeout": spec.connect_timeout, "timeout": spec.timeout}
    out: dict[str, Any] = {
        "address": address, "plain_address": plain, "connections": n,
        "new_connection": {"tls": _summary(_core.connection_cost(address, n, tls=tls, **timeouts)),
                           "tcp": None},
    }
    if plain is not None:
        out["new_connection"]["tcp"] = _summary(_core.connection_cost(plain, n, **timeouts))
    per_block = max(1, min(spec.samples, 4000) // BLOCKS)
    warmup = min(spec.warmup, 100)
    seed = spec.seed or 0
    hists: dict[str, dict[str, list[str]]] = {"tls": {"floor": [], "get": []},
                                              "tcp": {"floor": [], "get": []}}
    for block in range(BLOCKS):
        runs = [("tls", address, tls)] + ([("tcp", plain, None)] if plain else [])
        for name, where, t in (runs if block % 2 == 0 else runs[::-1]):
            raw = _core.profile_run(_request_spec(spec, where, t, per_block, warmup, seed + block),
                                    _core.Progress())
            for cell in raw["cells"]:
                if cell["op"] in ("floor", "get"):
                    hists[name][cell["op"]].append(cell["histogram"])
    out["request"] = {"value_size": REQUEST_SIZE, "protocol": spec.protocol,
                      "samples_per_transport": per_block * BLOCKS, **{
                          name: ({op: _summary(_core.hist_merge(hs)) for op, hs in ops.items()}
                                 if ops["get"] else None)
                          for name, ops in hists.items()}}
    return out


def tls_cost_rows(d: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The TLS cost table: per measurement, TLS p50/p99, TCP p50/p99 and TLS/TCP at p50."""
    rows = []
    req = d.get("request") or {}
    items = [(f"new connection to first reply ({d.get('connections')}x)",
              d["new_connection"]["tls"], d["new_connection"].get("tcp")),
             ("floor (minimal request)", (req.get("tls") or {}).get("floor"),
              (req.get("tcp") or {}).get("floor")),
             (f"get {req.get('value_size', REQUEST_SIZE)} B", (req.get("tls") or {}).get("get"),
              (req.get("tcp") or {}).get("get"))]
    for label, t, p in items:
        if not t:
            continue
        ratio = f"{t['p50_ns'] / p['p50_ns']:.2f}x" if p and p["p50_ns"] else "—"
        added = dur(t["p50_ns"] - p["p50_ns"]) if p else "—"
        rows.append([label, dur(t["p50_ns"]), dur(t["p99_ns"]),
                     dur(p["p50_ns"]) if p else "—", dur(p["p99_ns"]) if p else "—",
                     added, ratio])
    header = ["", "TLS p50", "TLS p99", "TCP p50", "TCP p99", "TLS adds (p50)", "TLS/TCP p50"]
    return header, rows


def render_tls_cost(d: dict[str, Any]) -> list[str]:
    """The TLS cost section of ``cachelab profile``'s report."""
    header, rows = tls_cost_rows(d)
    if d.get("plain_address"):
        title = f"TLS cost: {d['address']} (TLS) next to {d['plain_address']} (plain TCP)"
    else:
        title = (f"TLS cost: {d['address']} over TLS only — no plain listener given "
                 "(--plain-port), so there is no TCP to compare with")
    return [title, *text_table(header, rows)]
