"""How well a USL fit describes its data, stated without R² (not valid for a nonlinear
regression; R ``usl`` dropped it in 3.0.0)."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["relative_se"]


def relative_se(x: Sequence[float], sigma: float | None) -> float | None:
    """The residual standard error ``sigma`` as a percentage of the mean of the measured
    throughputs ``x`` (how the fit's quality is stated: R² is not valid for a nonlinear
    regression), or None when it cannot be computed."""
    mean = sum(x) / len(x) if x else 0.0
    if sigma is None or not (mean > 0 and math.isfinite(sigma)):
        return None
    return 100.0 * sigma / mean
