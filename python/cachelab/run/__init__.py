"""``cachelab run``: the whole study in one call, :func:`run_study`, ending in one HTML page."""

from __future__ import annotations

from cachelab.run.result import (
    DEFAULT_PRECISION,
    LIMITS,
    PRIVATE_ITEM_SIZE_MAX,
    PRIVATE_MEMORY_MB,
    SCHEMA,
    SCHEMA_VERSION,
    STEPS,
    RunResult,
    RunSpec,
    StepOutcome,
)
from cachelab.run.steps import REFERENCE_MODEL
from cachelab.run.study import run_study
from cachelab.run.verb import run

__all__ = ["DEFAULT_PRECISION", "LIMITS", "PRIVATE_ITEM_SIZE_MAX", "PRIVATE_MEMORY_MB",
           "REFERENCE_MODEL", "SCHEMA", "SCHEMA_VERSION", "STEPS", "RunResult", "RunSpec",
           "StepOutcome", "run", "run_study"]
