"""Latency profiles: measure them (:func:`profile`), load them (:func:`load_profile`).

A latency profile is the artifact documented in ``docs/artifacts.md`` (schema
``cachelab.latency-profile``, version 1): for each operation — get by value size, set by value
size, multi-get by key count, and the loopback floor — an HdrHistogram of latencies in
nanoseconds plus sample, error, mismatch and miss counts, and the facts needed to trust it.

The package: ``spec`` (what to measure), ``cell`` and ``model`` (the profile and its files),
``render`` (its tables), ``plots`` (its figures), ``builtin`` (published profiles), ``loader``,
``measure`` (the run), ``tier`` (profiling through a tiered tier) and ``section`` (its part of
the report).
"""

from cachelab.profile.cell import OPS, PLOT_FILES, PLOT_TITLES, TABLE_ROWS, Cell
from cachelab.profile.loader import load_profile
from cachelab.profile.measure import profile
from cachelab.profile.model import CSV_HEADER, SCHEMA, SCHEMA_VERSION, LatencyProfile
from cachelab.profile.render import iter_table_columns
from cachelab.profile.spec import (
    DEFAULT_KEY_COUNTS,
    DEFAULT_MULTI_VALUE_SIZE,
    DEFAULT_SIZES,
    MAX_KEY_COUNT,
    MAX_VALUE_SIZE,
    ProfileSpec,
    item_size_for,
    item_size_mib,
    memory_for,
    new_prefix,
    profile_writes,
)
from cachelab.profile.tier import (
    TierCell,
    delete_tier_cells,
    profile_via_tier,
    rank_sequence,
    spin,
    spin_until,
    think_summary,
    tier_cell_writes,
    tier_cells,
    tier_profile,
)
from cachelab.profile.verb import run

__all__ = [
    "CSV_HEADER",
    "DEFAULT_KEY_COUNTS",
    "DEFAULT_MULTI_VALUE_SIZE",
    "DEFAULT_SIZES",
    "MAX_KEY_COUNT",
    "MAX_VALUE_SIZE",
    "OPS",
    "PLOT_FILES",
    "PLOT_TITLES",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TABLE_ROWS",
    "Cell",
    "LatencyProfile",
    "ProfileSpec",
    "TierCell",
    "delete_tier_cells",
    "item_size_for",
    "item_size_mib",
    "iter_table_columns",
    "load_profile",
    "memory_for",
    "new_prefix",
    "profile",
    "profile_via_tier",
    "rank_sequence",
    "run",
    "spin",
    "spin_until",
    "think_summary",
    "tier_cell_writes",
    "tier_cells",
    "tier_profile",
    "profile_writes",
]
