"""The seed's findings, each checked against a run: does its direction reproduce here?"""

from __future__ import annotations

from typing import Any

from cachelab.tiers.result import TiersResult
from cachelab.tiers.spec import SHAPES, TiersSpec

__all__ = ["findings"]


def findings(result: TiersResult, spec: TiersSpec) -> list[dict[str, Any]]:
    """The seed's findings, each checked against this run: does its direction reproduce?"""
    codec = spec.codec
    comp = spec.compressions[0] if spec.compressions else None

    def t(shape: str, method: str) -> float:
        return float(result.row(shape, method)["wall_p50_us"])

    out: list[dict[str, Any]] = []

    def add(claim: str, holds: bool, evidence: str) -> None:
        out.append({"claim": claim, "reproduces": bool(holds), "evidence": evidence})

    mc = f"memcached + {codec}"
    add("memcached is faster than the store for the single large record (seed: about 2x)",
        t("record", mc) < t("record", "store"),
        f"record: {mc} {t('record', mc):.0f} µs vs store {t('record', 'store'):.0f} µs")
    add("memcached is faster than the store for the list of small records",
        t("list", mc) < t("list", "store"),
        f"list: {mc} {t('list', mc):.0f} µs vs store {t('list', 'store'):.0f} µs")
    add("process memory holding ready objects is much faster than memcached (≥10×)",
        all(t(s, "memory ready") * 10 <= t(s, mc) for s in SHAPES),
        "; ".join(f"{s}: memory ready {t(s, 'memory ready'):.2f} µs vs {mc} {t(s, mc):.0f} µs"
                  for s in SHAPES))
    mem_codec = f"memory + {codec}"
    add("serialized objects in process memory lose most of memory's advantage for the list "
        "(decoding costs at least half of a memcached read)",
        t("list", mem_codec) >= 0.5 * t("list", mc),
        f"list: {mem_codec} {t('list', mem_codec):.0f} µs vs {mc} {t('list', mc):.0f} µs")
    if comp is not None:
        mcc = f"{mc} + {comp}"
        add(f"compression ({comp}) makes reading the list of small records slower",
            t("list", mcc) > t("list", mc),
            f"list: {mcc} {t('list', mcc):.0f} µs vs {mc} {t('list', mc):.0f} µs")
        add(f"compression ({comp}) does not pay for itself on the large record on this network",
            t("record", mcc) >= t("record", mc),
            f"record: {mcc} {t('record', mcc):.0f} µs vs {mc} {t('record', mc):.0f} µs; "
            f"stored {result.row('record', mcc)['stored_bytes']:,} B vs "
            f"{result.row('record', mc)['stored_bytes']:,} B")
    return out
