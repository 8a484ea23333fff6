"""The words cachelab's output uses, in plain words, each defined once (issue 31: "Plain words
for jargon, defined once in a glossary section of the report and docs").

:data:`TERMS` is the one source: ``docs/glossary.md`` is :func:`markdown` of it (a test keeps
the two equal, and says how to write it), and the report
ends with the terms its page uses (:func:`used_in`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["TERMS", "Term", "markdown", "used_in"]


@dataclass(frozen=True)
class Term:
    """One entry: the word as the output prints it, its meaning in a sentence or two, and the
    strings whose presence on a page shows the word is used there (the term itself when
    empty; matched case-sensitively)."""

    term: str
    text: str
    seen: tuple[str, ...] = ()

    def marks(self) -> tuple[str, ...]:
        return self.seen or (self.term,)


TERMS: tuple[Term, ...] = (
    # -- how far to trust a number ---------------------------------------------------------
    Term("certified", "Measured, every check of the measurement passed and, when a precision "
         "was asked for, its 95 % interval is within it: you can quote the number."),
    Term("indicative", "Measured, but a check failed or the precision was not reached: the "
         "number is what happened on this run, not what the system does. The card says why; "
         "the line under \"what to trust\" says what would fix it."),
    Term("predicted", "Computed by a model or a simulation from measured inputs (a profile, a "
         "trace), not measured on the system itself."),
    Term("not measured", "The answer is missing: no fit, a step that failed or was skipped. "
         "The card says why."),
    Term("what to trust", "The block under the answer card that gathers every verdict, "
         "precision miss and warning of a result, each with the change that would fix it "
         "(after the arrow →).", ("what to trust", "What to trust")),
    Term("PARTIAL", "The run was cut short (Ctrl-C, or the server failed): what it measured "
         "is kept and marked, with how much of what was asked it covers."),
    # -- the load verdict and its checks ---------------------------------------------------
    Term("VALID / INVALID", "The verdict on a load run as a measurement. VALID: every check "
         "below passed. INVALID: at least one failed, so the numbers describe this run, not "
         "the server; the line names the worst reason and its fix.", ("VALID", "INVALID")),
    Term("stationary", "The throughput and p99 stayed level over the measured run: no stall "
         "and no drift (an ADF test on the per-interval series). A run that is not "
         "stationary measured a changing system.", ("stationary",)),
    Term("independent", "Consecutive latencies do not depend on each other (a rank "
         "correlation test). When they do, the samples count for less and the intervals are "
         "widened (block bootstrap).", ("independent",)),
    Term("client saturated", "The load client, not the server, set the pace: its threads "
         "were busy nearly all the time, so its latencies include its own queueing. Run the "
         "client on another host or with more machines (`--ray`).",
         ("client saturated", "CLIENT SATURATED")),
    Term("rate held", "In open loop, the client sent at the target rate in every interval. "
         "When it could not (NOT held), requests piled up and the latencies include that.",
         ("rate held", "rate not held", "NOT held")),
    Term("late sends", "Requests that left the client 1 ms or more after their intended send "
         "time: the client's own queueing, which the corrected latency counts.",
         ("late sends", "sends left late")),
    Term("arrivals Poisson", "With Poisson arrivals the sends leave one by one and their "
         "counts in windows of ten mean gaps have a variance equal to their mean; the check "
         "tests both (gaps of 0, the index of dispersion), leaving out the windows of sends "
         "the client held up.",
         ("Poisson",)),
    # -- precision and intervals -----------------------------------------------------------
    Term("95 % interval", "The range that holds the true value with 95 % confidence, computed "
         "from the samples (for percentiles, from the histogram, with a block bootstrap when "
         "latencies are not independent).", ("95 %",)),
    Term("precision ±", "How wide a percentile's 95 % interval is, as ± a share of the "
         "value. `--precision 5%` measures until the p99 (or the named percentile) is within "
         "±5 %; \"precision NOT reached\" says it stopped before, and what would get there.",
         ("precision",)),
    Term("n/a (k)", "No interval for that percentile: only k samples lie beyond it, too few "
         "to bound it. More samples or a longer run give one.", ("n/a (",)),
    Term("p50, p99, p99.9", "Percentiles: the latency that 50 %, 99 %, 99.9 % of the requests "
         "were at or under. p50 is the median; p99 is the slowest 1 %.", ("p50", "p99")),
    # -- latency ---------------------------------------------------------------------------
    Term("corrected / uncorrected latency", "In open loop each request has an intended send "
         "time. Corrected latency counts from then, so a client that fell behind does not "
         "hide the wait (coordinated omission); uncorrected counts from the actual send.",
         ("corrected",)),
    Term("coordinated omission", "The error of a load client that waits for slow replies "
         "before sending more: it sends fewer requests exactly when the server is slow, and "
         "its latencies look better than what users see.", ("coordinated omission",)),
    Term("open / closed loop", "Open loop sends at a fixed rate whatever the replies do, as "
         "independent users would; closed loop sends the next request when a reply comes "
         "back, so the server's speed sets the rate.", ("open loop", "closed loop")),
    Term("warm-up", "The first seconds of a run, measured but left out of the figures: "
         "connections, caches and the server settle.", ("warm-up",)),
    Term("steady window", "The part of the measured run after throughput and p50 stopped "
         "changing, where the figures come from.", ("steady window", "steady state")),
    Term("stall", "A stretch where requests waited 100 ms or more (`--stall-ms`); it makes a "
         "run not stationary and is listed with its time and the replies it held up.",
         ("stall",)),
    Term("floor", "The round trip of the cheapest request memcached answers (`mn`, a no-op, "
         "on a raw socket; through a proxy a get of a key never written): what the network "
         "and the client cost before memcached does any real work.", ("floor",)),
    Term("p50/floor", "A cell's median latency divided by the floor's: how many round trips' "
         "worth of time the operation takes.", ("p50/floor",)),
    # -- scaling ---------------------------------------------------------------------------
    Term("USL", "The Universal Scalability Law: throughput X(N) = γN / (1 + α(N−1) + "
         "βN(N−1)) at concurrency N. It says where adding load stops adding throughput.",
         ("USL", "Universal Scalability Law")),
    Term("α (contention)", "The USL's serial share: the part of the work that waits in line "
         "(a lock, one core). It makes throughput level off.", ("α",)),
    Term("β (coherency)", "The USL's cost of keeping parties in step, growing with every pair "
         "of them. It makes throughput fall past a peak.", ("β",)),
    Term("Nmax", "The concurrency where the USL's throughput peaks, √((1−α)/β); past it, more "
         "load gives less.", ("Nmax",)),
    Term("R(N) = N/X", "The mean response time at concurrency N from Little's law: N "
         "requests in flight over the throughput X.", ("R(N)",)),
    Term("Amdahl", "The USL with β = 0: throughput rises towards a ceiling γ/α and never "
         "falls.", ("Amdahl",)),
    # -- caching strategies and simulation -------------------------------------------------
    Term("none", "The strategy with no in-process cache: every touch goes to memcached.",
         ("none,", "`none`", ">none<")),
    Term("lru:SIZE", "An in-process LRU cache per app instance holding SIZE value bytes (or "
         "N items): the least recently used item leaves first.", ("lru:",)),
    Term("fixed:N", "A fixed hot set in process: the N items touched most in the training "
         "window, kept whatever happens.", ("fixed:",)),
    Term("prefetch", "`prefetch-children` (= `prefetch:depth=1`) and `prefetch:depth=D`: "
         "fetch a topic and its missing children (to depth D) in one multi-get, ahead of "
         "their touches.", ("prefetch",)),
    Term("miss ratio", "The share of requests a cache does not hold and must fetch from "
         "below.", ("miss ratio", "miss-ratio")),
    Term("MRC", "Miss ratio curve: the miss ratio as a function of cache size, which tells "
         "how much memory a target miss ratio needs.", ("MRC", "miss ratio curve")),
    Term("the seed's findings", "The claims of the article this project started from (its "
         "tables and figures for App Engine and its storage benchmark); `tiers` and "
         "`simulate` say which of them reproduce here.", ("the seed",)),
    # -- pools -----------------------------------------------------------------------------
    Term("ketama", "Consistent hashing as libmemcached does it: each member owns points on a "
         "ring and a key goes to the next point after its hash, so adding a member moves "
         "only its share of keys.", ("ketama",)),
    Term("modula", "A key goes to member hash(key) mod the number of members: simple, but "
         "changing the members moves almost every key.", ("modula",)),
    Term("rendezvous", "Highest random weight: each key goes to the member whose hash with the "
         "key is highest; adding a member moves only its share.", ("rendezvous",)),
)


def used_in(text: str, terms: Sequence[Term] = TERMS) -> list[Term]:
    """The terms ``text`` (a page's visible text) uses, in glossary order."""
    return [t for t in terms if any(m in text for m in t.marks())]


def markdown(terms: Sequence[Term] = TERMS) -> str:
    """``docs/glossary.md``: every term, in order, with its meaning."""
    lines = ["# Glossary", "",
             "The words cachelab's tables, cards and reports use, in plain words. Generated "
             "from `python/cachelab/glossary.py` (its `markdown()`; a test keeps the two "
             "equal); the report ends with the terms its page uses.", ""]
    for t in terms:
        lines += [f"**{t.term}** — {t.text}", ""]
    return "\n".join(lines)

