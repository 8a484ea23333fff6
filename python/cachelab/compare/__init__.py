"""A/B comparison of saved results of one kind: :func:`compare`.

The first result is the baseline A; every other one is compared with it. Each row of the
result is one item (a profile cell, a strategy, a load N, the whole run) and one metric
(a percentile, throughput, hit ratio), with the change relative to A and an interval:

* **latency percentiles** (profiles, load runs): a bootstrap over each HdrHistogram's samples.
  Resampling n values from a histogram and taking the nearest-rank percentile q gives the
  k-th smallest of n uniform draws mapped through the histogram's quantile function, k =
  ⌈q·n⌉; that order statistic is Beta(k, n − k + 1) distributed, so each resample costs one
  Beta draw and one quantile lookup per histogram — exact for the recorded histogram, with
  no need to expand it into samples. The interval is the percentile interval of the
  resampled ratio B/A − 1.
* **throughput** (load runs: the intervals of the measured run; scale sweeps: the repeats at each
  N): Welch's t interval for the difference of means, as a share of A's mean.
* **simulations**: the band over repeated latency draws that ``simulate`` reports (min–max);
  the interval runs from the least to the most favourable pairing of the two bands.

A verdict ("higher"/"lower") is given only when the interval excludes zero; otherwise "no
clear difference". Percentiles with fewer than 10 samples beyond them get "too few samples".
Results of different kinds, or measured with settings that change what is measured (protocol,
concurrency, load mode and mix, a simulation's trace), are refused unless
``allow_different``.

Live A/B of server commands (:func:`compare_servers`): each memcached command line on a
private port, interleaved rounds of a short load, means over rounds with Welch's t intervals.

Rooms: ``stats`` (intervals, verdicts and rows every comparison shares), one per kind —
``profiles``, ``load``, ``scale``, ``simulation`` (request-level and flat), ``tiers`` —,
``engine`` (finding the results and dispatching by kind), ``servers`` (the live A/B),
``result`` (the result, its artifacts and its table), ``plots`` (the forest plot),
``section`` (its part of the report), ``spec`` (what to compare, its fields' ranges).
"""

from cachelab.compare.engine import COMPARERS, compare, compare_artifacts, load_for_compare
from cachelab.compare.plots import compare_plot
from cachelab.compare.result import (
    CSV_COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    CompareResult,
    render,
    summarize,
)
from cachelab.compare.servers import compare_servers, parse_server_cmd
from cachelab.compare.spec import LIMITS
from cachelab.compare.stats import MIN_TAIL, PERCENTILES
from cachelab.compare.verb import CompareSpec, run

__all__ = ["COMPARERS", "CSV_COLUMNS", "LIMITS", "MIN_TAIL", "PERCENTILES", "SCHEMA",
           "SCHEMA_VERSION", "CompareResult", "CompareSpec", "compare", "compare_artifacts",
           "compare_plot", "compare_servers", "load_for_compare", "parse_server_cmd", "render",
           "run", "summarize"]
