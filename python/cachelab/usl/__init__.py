"""The Universal Scalability Law: fit X(N) = γN / (1 + α(N−1) + βN(N−1)) to measurements.

γ is the throughput of one unit of load, α the cost of contention (waiting for a shared
resource), β the cost of coherency (units exchanging data pairwise). Throughput peaks at
Nmax = sqrt((1−α)/β); with β = 0 the law is Amdahl's and throughput approaches γ/α::

    from cachelab.usl import fit_usl, fit_csv
    f = fit_usl([1, 2, 4, 8, 16, 32], [955, 1879, 3549, 6531, 9897, 12074])
    f.alpha, f.beta, f.gamma, f.peak["n_max"], f.ci["alpha"]
    f.predict([48, 64])          # X(N) and R(N) = N/X(N) with intervals
    f = fit_csv("data.csv", n="threads", x="qps", method="unbounded")

The fitting is Rust (``cachelab-usl``): bounded Levenberg–Marquardt with an analytic Jacobian
from several starting points, standard errors from (JᵀJ)⁻¹·s², Student-t intervals, and a
seeded residual bootstrap for Nmax and the peak. See ``docs/usl.md``.
"""

from cachelab.usl.data import fit_csv, read_csv
from cachelab.usl.fit import METHODS, MIN_POINTS, fit_usl, t_quantile
from cachelab.usl.quality import relative_se
from cachelab.usl.result import (
    CSV_HEADER,
    PARAMS,
    SCHEMA,
    SCHEMA_VERSION,
    UslFit,
    csv_rows,
    read_usl_result,
)
from cachelab.usl.verb import LIMITS, UslSpec, run

__all__ = ["CSV_HEADER", "LIMITS", "METHODS", "MIN_POINTS", "PARAMS", "SCHEMA", "SCHEMA_VERSION",
           "UslFit", "UslSpec", "csv_rows", "fit_csv", "fit_usl", "read_csv", "read_usl_result",
           "relative_se", "run", "t_quantile"]
