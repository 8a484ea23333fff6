"""The JSON Schema of each result kind, as far as cachelab reads it back (``report``,
``compare``, ``simulate --model``, ``profile --show``): every field a reader uses, with its
type, and those it cannot do without marked required. Fields no reader uses are left free,
so results of other cachelab versions with the same schema version still read.

:func:`check_fields` applies one with the ``jsonschema`` library (Draft 2020-12, histograms
checked by decoding them) and turns the first problem into one
:class:`~cachelab.errors.InputError` naming the file and the field:
``run1/load.json: field totals.corrected: expected an object or null, got 5``.
docs/artifacts.md documents the fields; this module is what is checked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

import cachelab._core as _core
from cachelab.answers import TRUST
from cachelab.errors import InputError

__all__ = ["SCHEMAS", "check_fields", "field_problem"]

Schema = dict[str, Any]

# -- building blocks ----------------------------------------------------------------------


def _t(*types: str, **more: Any) -> Schema:
    return {"type": list(types) if len(types) > 1 else types[0], **more}


STR, INT, NUM, BOOL = _t("string"), _t("integer"), _t("number"), _t("boolean")
STR_ = _t("string", "null")
INT_ = _t("integer", "null")
NUM_ = _t("number", "null")
BOOL_ = _t("boolean", "null")
COUNT = _t("integer", minimum=0)
COUNT_ = _t("integer", "null", minimum=0)
SIZE = _t("number", minimum=0)
SIZE_ = _t("number", "null", minimum=0)
#: An HdrHistogram in the V2 compressed base64 encoding: decoded to be checked.
HIST = _t("string", format="hdrhistogram")
HIST_ = _t("string", "null", format="hdrhistogram")
ANY: Schema = {}


def obj(*required: str, null: bool = False, **props: Schema) -> Schema:
    """An object with ``props`` (those named in ``required`` must be there); others free."""
    s: Schema = _t("object", "null") if null else _t("object")
    if props:
        s["properties"] = props
    if required:
        s["required"] = list(required)
    return s


def arr(items: Schema = ANY, *, null: bool = False) -> Schema:
    return _t("array", "null", items=items) if null else _t("array", items=items)


def mapping(values: Schema, *, null: bool = False) -> Schema:
    """An object of any keys, each value ``values``."""
    return {**(_t("object", "null") if null else _t("object")),
            "additionalProperties": values}


def pair(item: Schema, *, null: bool = False) -> Schema:
    """``[low, high]``."""
    return {**arr(item, null=null), "minItems": 2, "maxItems": 2}


def one_of(*values: Any) -> Schema:
    return {"enum": list(values)}


def head(schema: str, *versions: int) -> Schema:
    return {"schema": {"const": schema}, "schema_version": one_of(*versions)}


#: The validity checks of a load run (load.validity.CHECKS: a test keeps the two equal).
CHECK_NAMES = ("client", "rate", "stationary", "late", "independent", "arrivals")

#: Percentile name -> ns (``"50"``, ``"99.9"``, ``"max"``).
PERCENTILES = mapping(NUM_)
ERRORS = mapping(COUNT)
ENVIRONMENT = obj(null=True)
RUN = obj(null=True, elapsed_s=NUM_, cancelled=BOOL_, aborted=STR_, leftover_keys=COUNT,
          cleaned_up_keys=COUNT_, started_unix=NUM_, user_items_lost=COUNT_,
          agents_lost=arr(null=True))

# -- latency profile ------------------------------------------------------------------------

CELL = obj("op", "value_size", "keys", "samples", "histogram", "percentiles",
           op=one_of("floor", "get", "set", "multiget"), value_size=COUNT, keys=COUNT,
           samples=COUNT, histogram=HIST, errors=ERRORS, mismatches=COUNT, misses=COUNT,
           percentiles=mapping(NUM), intervals=mapping(pair(NUM, null=True)),
           precision=obj("reached", null=True, half_width=NUM_, reached=BOOL))

FIGURE = obj(null=True, count=COUNT_, mean_ns=NUM_, p50_ns=NUM_, p90_ns=NUM_, p99_ns=NUM_,
             histogram=HIST_)

PROFILE = obj(
    "schema", "schema_version", "cells",
    **head("cachelab.latency-profile", 1),
    name=STR, source=STR, created=STR, unit=STR,
    server=obj(transport=STR_, address=STR_, private=BOOL_, argv=arr(null=True),
               version=STR_),
    client=obj(samples=COUNT_, warmup=COUNT_, concurrency=_t("integer", "null", minimum=1),
               protocol=STR_, floor_command=STR_),
    environment=obj(), run={**RUN, "type": "object"}, cells=arr(CELL),
    published=obj(null=True, source=STR_),
    tls_cost=obj(null=True, plain_address=STR_, connections=COUNT_,
                 new_connection=obj(null=True, tls=FIGURE, tcp=FIGURE),
                 request=obj(null=True, value_size=COUNT_, protocol=STR_,
                             samples_per_transport=COUNT_,
                             tls=obj(null=True, floor=FIGURE, get=FIGURE),
                             tcp=obj(null=True, floor=FIGURE, get=FIGURE))),
    precision=obj("target", null=True, target=NUM, percentile=STR_, cap_samples=COUNT_,
                  batches=COUNT_),
)

# -- load -----------------------------------------------------------------------------------

INTERVALS = obj(null=True, basis=obj(null=True, withheld=ANY),
                ranges=mapping(pair(NUM, null=True), null=True), tail=mapping(COUNT))
_LATENCY: Schema = dict(count=COUNT, histogram=HIST, percentiles=PERCENTILES, mean=NUM_,
                        max=NUM_, intervals=INTERVALS)
#: A histogram entry (``uncorrected``; ``corrected``, which is null in closed loop).
LATENCY = obj("count", "histogram", "percentiles", **_LATENCY)
LATENCY_ = obj("count", "histogram", "percentiles", null=True, **_LATENCY)
OPS = mapping(COUNT)
WINDOW = obj("first_index", "intervals", "replies", "throughput", "errors", "lost",
             "uncorrected",
             first_index=COUNT, intervals=COUNT, duration_s=SIZE, ops=OPS, replies=COUNT,
             throughput=NUM, hits=COUNT, misses=COUNT, errors=ERRORS, lost=COUNT, sent=COUNT,
             corrected=LATENCY_, uncorrected=LATENCY)
INTERVAL = obj("start_s", "duration_s", "replies", "uncorrected",
               index=COUNT, start_s=NUM, duration_s=SIZE, warmup=BOOL, ops=OPS,
               replies=COUNT, throughput=NUM_, hits=COUNT, misses=COUNT, errors=ERRORS,
               lost=COUNT, sent=COUNT, corrected=LATENCY_, uncorrected=LATENCY)
STALL = obj("start_s", "end_s", start_s=NUM, end_s=NUM)
VALIDITY = {
    **obj("verdict", "reasons", "checks", null=True, verdict=one_of("VALID", "INVALID"),
          reasons=arr(STR), fixes=arr(STR), failed=arr(STR), throughput_reasons=arr(STR),
          not_checked=arr(STR), checks=mapping(obj(null=True, status=STR_, why=STR_))),
    # INVALID says why
    "if": {"properties": {"verdict": {"const": "INVALID"}}, "required": ["verdict"]},
    "then": {"properties": {"reasons": {"minItems": 1}}},
}
MEMBER = obj("address", "latency", "errors", "down", "down_s", "keys", "sent", "replies",
             address=STR, latency=obj("percentiles", percentiles=PERCENTILES),
             errors=ERRORS, down=arr(), down_s=NUM, keys=COUNT, sent=COUNT, replies=COUNT)
LOAD_SPEC = obj(connections=INT_, threads=INT_, warmup=NUM_, stall_ms=NUM_, duration=NUM_,
                requests=COUNT_, mix=mapping(NUM, null=True), precision=NUM_)
LOAD = obj(
    "schema", "schema_version", "created", "spec", "mode", "intervals", "steady", "totals",
    "all", "server", "client", "schedule", "run",
    **head("cachelab.load", 2),
    created=STR, spec=LOAD_SPEC, mode=one_of("open", "closed"), intervals=arr(INTERVAL),
    steady=obj(start_index=INT_, reached=BOOL_, short=BOOL_, window=obj(null=True)),
    totals=WINDOW, all=WINDOW,
    server=obj(address=STR_, transport=STR_, private=BOOL_, argv=arr(null=True),
               version=STR_, deltas=obj(null=True), schedstat=obj(null=True)),
    client=obj(), schedule=obj(null=True, held=BOOL_), run={**RUN, "type": "object"},
    stalls=arr(STALL), environment=obj(), validity=VALIDITY, members=arr(MEMBER, null=True),
    pool=obj(null=True, distribution=STR_,
             skew=obj("ratio", "hottest", "share", "fair_share", null=True, ratio=NUM,
                      hottest=STR, share=NUM, fair_share=NUM)),
    probe=obj("rate", "totals", "all", "validity", null=True, rate=NUM,
              totals=obj("corrected", corrected=LATENCY, uncorrected=LATENCY_),
              all=obj("errors", errors=ERRORS), validity=VALIDITY),
    precision=obj(null=True, reached=BOOL), repeats=obj(null=True),
)

# -- scale, usl -----------------------------------------------------------------------------

_BAND3 = obj(null=True, lo=NUM_, median=NUM_, hi=NUM_)
#: A USL fit (``usl.json``, and ``fit`` in ``scale.json``): every field of
#: :class:`cachelab.usl.UslFit`, which reads them all.
USL_FIELDS: Schema = dict(
    method=STR, level=_t("number", exclusiveMinimum=0, exclusiveMaximum=1),
    n={**arr(NUM), "minItems": 1}, x={**arr(NUM), "minItems": 1}, gamma=NUM, alpha=NUM,
    beta=NUM, se=mapping(NUM_), ci=mapping(pair(NUM_, null=True)),
    cov={**arr({**arr(NUM_), "minItems": 3, "maxItems": 3}, null=True), "minItems": 3,
         "maxItems": 3},
    free=mapping(BOOL),
    at_bound=mapping(BOOL), sse=NUM_, sigma=NUM_, df=INT, t=NUM_, r_squared=NUM_,
    fitted=arr(NUM_), residuals=arr(NUM_), iterations=INT, converged=BOOL,
    peak=obj(n_max=NUM_, n_max_integer=INT_, n_max_floor=INT_, x_max=NUM_, amdahl_limit=NUM_,
             n_max_infinite=BOOL_),
    bootstrap=obj(null=True, resamples=COUNT_, failed=COUNT_, gamma=_BAND3, alpha=_BAND3,
                  beta=_BAND3, n_max=_BAND3, x_max=_BAND3),
    warnings=arr(obj("code", "message", code=STR, message=STR)),
    predictions=arr(obj()), superlinear=obj(null=True), source=obj(), created=STR)
_USL_REQUIRED = ("method", "level", "n", "x", "gamma", "alpha", "beta", "se", "ci", "cov",
                 "free", "at_bound", "sse", "sigma", "df", "t", "r_squared", "fitted",
                 "residuals", "iterations", "converged", "peak", "bootstrap", "warnings")
USL_FIT = obj("schema", "schema_version", *_USL_REQUIRED, null=True,
              **head("cachelab.usl", 1), **USL_FIELDS)
SCALE_ROW = obj("n", "runs", "throughput_mean", "latency",
                n=NUM, runs=COUNT, throughput_runs=COUNT_, throughput_mean=NUM_,
                throughput_sd=NUM_,
                latency=obj("percentiles_ns", percentiles_ns=PERCENTILES, histogram=HIST_,
                            p99_interval=obj(null=True, range=pair(NUM, null=True),
                                             withheld=ANY),
                            verdict=STR_),
                precision=obj("half_width", "runs_reached", "runs", null=True,
                              half_width=NUM_, runs_reached=COUNT, runs=COUNT))
SCALE_RUN = obj("n", "throughput", n=NUM, throughput=NUM, verdict=STR_,
                failed_checks=arr(one_of(*CHECK_NAMES)), invalid_reasons=arr(STR, null=True),
                throughput_reasons=arr(STR, null=True), precision=obj(null=True))
SCALE = obj(
    # every field ScaleResult cannot be made without (its dataclass fields with no default)
    "schema", "schema_version", "created", "spec", "runs", "summary", "fit", "limits", "server",
    **head("cachelab.scale", 1),
    spec=obj("vary", "repeats", "window", "settle", vary=STR, repeats=COUNT, window=NUM,
             settle=NUM, precision=_t("number", "null", exclusiveMinimum=0),
             keep_invalid=BOOL_, workload=ANY),
    runs=arr(SCALE_RUN), summary=arr(SCALE_ROW), fit=USL_FIT, limits=arr(STR),
    # where a private server and the client ran (cachelab.scale.pinning)
    server=obj(cpus=obj(null=True, pinned=BOOL_, usable=COUNT_, reason=STR_,
                        server=arr(COUNT, null=True), client=arr(COUNT, null=True))),
    environment=ENVIRONMENT, run=RUN,
)
USL = {**USL_FIT, "type": "object"}

# -- simulation, tiers, replay --------------------------------------------------------------

_BAND = {"median": NUM, "low": NUM, "high": NUM}
STRATEGY = obj(
    "strategy", "hit_ratio", strategy=STR, hit_ratio=NUM, round_trips_per_request=NUM,
    bytes_per_request=NUM,
    percentiles=arr(obj("percentile", "median", "low", "high", percentile=NUM, **_BAND)),
    slowed=arr(obj("threshold", "median", "low", "high", threshold=NUM, **_BAND)),
    curve=obj(null=True, percentile=arr(NUM), median=arr(NUM_), low=arr(NUM_),
              high=arr(NUM_)))
_REQUEST_SIM = obj("strategies", "spec", "trace",
                   strategies=arr(STRATEGY),
                   spec=obj(train=NUM_),
                   trace=obj(source=STR_, requests=COUNT, items=COUNT,
                             generator=obj(null=True)),
                   model=obj(name=STR_), warnings=arr(STR))
_FLAT_SIM = obj("trace", trace=obj(source=STR_, path=STR_, requests=COUNT_,
                                   unique_keys=COUNT_, total_bytes=COUNT_,
                                   working_set_bytes=COUNT_),
                results=arr(obj("policy", "capacity", policy=STR, capacity=NUM,
                                miss_ratio=NUM_, byte_miss_ratio=NUM_)),
                mrc=obj("capacities", "miss_ratios", null=True, capacities=arr(NUM),
                        miss_ratios=arr(NUM_), byte_miss_ratios=arr(NUM_), exact=BOOL,
                        sample_rate=NUM_, unit=STR_),
                unit=STR_)
SIMULATION = {
    **obj("schema", "schema_version", **head("cachelab.simulation", 1),
          mode=one_of("request", "flat"), environment=ENVIRONMENT, run=RUN),
    "if": {"properties": {"mode": {"const": "flat"}}, "required": ["mode"]},
    "then": _FLAT_SIM, "else": _REQUEST_SIM,
}
SIZE = obj(
    "schema", "schema_version", "spec", "requests", "keys", "working_set_bytes",
    "max_hit_ratio", "targets", "curve", **head("cachelab.size", 1),
    spec=obj("trace", trace=STR), accounting=STR_, requests=COUNT, keys=COUNT,
    working_set_bytes=SIZE, max_hit_ratio=NUM, exact=BOOL_,
    targets=arr(obj("hit_ratio", "bytes", hit_ratio=NUM, bytes=SIZE_,
                    bracket=pair(SIZE, null=True))),
    memory=SIZE_,
    at_memory=arr(obj("multiple", "bytes", "hit_ratio", multiple=NUM, bytes=SIZE,
                      hit_ratio=NUM), null=True),
    check=obj("memory", "observed", "predicted_cold", "predicted_warm", "verdict", null=True,
              memory=SIZE, observed=NUM, predicted_cold=NUM, predicted_warm=NUM,
              verdict=STR, lost_lines=COUNT_),
    curve=obj("bytes", "miss_ratio", bytes=arr(SIZE), miss_ratio=arr(NUM)),
    environment=ENVIRONMENT,
)
TIERS = obj(
    "schema", "schema_version", "spec", "rows", **head("cachelab.tiers", 1),
    spec=obj(), store=ANY,
    rows=arr(obj("shape", "method", "wall_p50_us", "wall_p90_us", "cpu_mean_us",
                 "stored_bytes",
                 shape=STR, method=STR, histogram=HIST_, reads=COUNT_, wall_p50_us=NUM,
                 wall_p90_us=NUM, cpu_mean_us=NUM, stored_bytes=COUNT)),
    findings=arr(obj("claim", "reproduces", "evidence", claim=STR, reproduces=BOOL,
                     evidence=STR)),
    environment=ENVIRONMENT, run=RUN,
)
_PERCENTILE_KEYS = {"pattern": r"^[0-9]+(\.[0-9]+)?$"}
_MEASURED = obj("measured", "predicted", "error", measured=NUM, predicted=NUM, error=NUM)
REPLAY = obj(
    "schema", "schema_version", "strategies", **head("cachelab.replay", 1, 2),
    strategies=arr(obj("strategy", "increase", "added_ms", strategy=STR,
                       increase={**mapping(_MEASURED), "propertyNames": _PERCENTILE_KEYS},
                       added_ms=mapping(obj("measured", measured=NUM)),
                       within_tolerance=BOOL_, library_overhead_share=NUM_)),
    machine=obj("busy", "others_cores", "cores", null=True, busy=BOOL, others_cores=NUM,
                cores=NUM),
    environment=ENVIRONMENT, run=RUN,
)

# -- compare, run ---------------------------------------------------------------------------

COMPARE_ROW = {
    **obj("item", "metric", "versus", "a", "b", "relative", "ci_low", "ci_high", "verdict",
          "direction",
          item=STR, metric=STR, versus=STR, a=NUM_, b=NUM_, unit=STR_, relative=NUM_,
          ci_low=NUM_, ci_high=NUM_, verdict=STR, direction=STR_),
    # an interval has both ends
    "if": {"properties": {"ci_low": NUM}, "required": ["ci_low"]},
    "then": {"properties": {"ci_high": NUM}},
}
COMPARE = obj(
    "schema", "schema_version", "kind", "names", "rows",
    **head("cachelab.compare", 1),
    kind=STR, names=arr(STR), sources=arr(STR), method=STR_, rows=arr(COMPARE_ROW),
    warnings=arr(STR), summary=arr(STR), partial=mapping(STR, null=True),
    environment=ENVIRONMENT,
    trust=mapping(obj("trust", trust=one_of(*TRUST), why=STR_)),
)
#: One line of an answer card (:class:`cachelab.answers.Answer`).
ANSWER = obj("question", "value", "trust", question=STR, value=STR,
             trust=one_of(*TRUST), why=STR_)
STEP = obj("name", "status", name=STR, status=STR, elapsed_s=NUM, summary=STR_, error=STR_,
           dir=STR_, answers=arr(ANSWER), caveats=arr(STR), traceback=arr(STR))
RUN_SUMMARY = obj(
    "schema", "schema_version", "steps",
    **head("cachelab.run", 1),
    steps=arr(STEP), elapsed_s=NUM, interrupted=BOOL_,
    server=obj(address=STR_, private=BOOL_), environment=ENVIRONMENT,
)

#: Artifact kind (:data:`cachelab.artifacts.KINDS`) -> its schema.
SCHEMAS: dict[str, Schema] = {
    "profile": PROFILE, "load": LOAD, "scale": SCALE, "usl": USL, "simulation": SIMULATION,
    "size": SIZE, "tiers": TIERS, "replay": REPLAY, "compare": COMPARE, "run": RUN_SUMMARY,
}

# -- checking -------------------------------------------------------------------------------


@cache
def _validator(kind: str) -> Any:
    # deferred: jsonschema takes ~0.1 s to import; only reading results back needs it
    import jsonschema

    formats = jsonschema.FormatChecker(formats=())

    @formats.checks("hdrhistogram", raises=(InputError, ValueError))
    def _histogram(value: object) -> bool:
        if isinstance(value, str):
            _core.hist_summary(value)
        return True

    # The schemas themselves are checked against the meta-schema by a test, not at each read.
    return jsonschema.Draft202012Validator(SCHEMAS[kind], format_checker=formats)


_TYPE_WORDS = {"object": "an object", "array": "a list", "string": "a string",
               "integer": "a whole number", "number": "a number", "boolean": "true or false",
               "null": "null"}


def _field(path: Any) -> str:
    """``totals.corrected``, ``cells[3].histogram``: a JSON path as the docs write it."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _shown(value: Any) -> str:
    text = json.dumps(value, allow_nan=True)
    return text if len(text) <= 40 else text[:37] + "..."


def field_problem(error: Any) -> str:
    """``field F: expected …, got …`` for one jsonschema ValidationError."""
    where = list(error.absolute_path)
    v = error.validator
    if v == "required":
        missing = next((k for k in error.validator_value if k not in error.instance), None)
        return f"field {_field([*where, missing])}: missing"
    if v == "type":
        want = error.validator_value
        want = [want] if isinstance(want, str) else want
        words = " or ".join(_TYPE_WORDS.get(w, w) for w in want)
        return f"field {_field(where)}: expected {words}, got {_shown(error.instance)}"
    if v in ("enum", "const"):
        allowed = error.validator_value if v == "enum" else [error.validator_value]
        return (f"field {_field(where)}: expected one of {', '.join(map(_shown, allowed))}, "
                f"got {_shown(error.instance)}")
    if v == "minimum":
        return (f"field {_field(where)}: expected at least {error.validator_value}, got "
                f"{_shown(error.instance)}")
    if v == "format":
        return f"field {_field(where)}: not a valid HdrHistogram"
    if v in ("minItems", "maxItems") and error.validator_value == 2:
        return f"field {_field(where)}: expected [low, high], got {_shown(error.instance)}"
    if v == "minItems":
        return f"field {_field(where)}: expected at least {error.validator_value} item(s)"
    if v == "maxItems":
        return f"field {_field(where)}: expected at most {error.validator_value} item(s)"
    return f"field {_field(where) or '(top)'}: {error.message}"


def check_fields(data: Mapping[str, Any], kind: str, where: str) -> None:
    """InputError ``WHERE: field F: …`` for the first field of ``data`` (an artifact of
    ``kind``) that its schema refuses: the shallowest, so a missing object is named rather
    than each of its fields."""
    if kind not in SCHEMAS:
        return
    errors = list(_validator(kind).iter_errors(data))
    if errors:
        first = min(errors, key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
        raise InputError(f"{where}: {field_problem(first)}")
