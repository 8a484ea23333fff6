"""cachelab: measure, model and simulate memcached.

The verbs are functions here and commands of the ``cachelab`` CLI:

>>> import cachelab
>>> result = cachelab.profile(cachelab.ProfileSpec(samples=1000))   # a private memcached
>>> result.table("get")                                             # doctest: +SKIP
>>> trace = cachelab.synthesize(cachelab.SynthParams(requests=10_000))
>>> cachelab.simulate(trace, cachelab.SimulateSpec(strategies=("none", "fixed:500")))

Errors are the classes in :mod:`cachelab.errors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cachelab._core import __version__
from cachelab._lazy import exports
from cachelab.errors import CachelabError

if TYPE_CHECKING:
    from cachelab.profiles import LatencyProfile, ProfileSpec, load_profile, profile
    from cachelab.simulation import SimulateSpec, SimulationResult, simulate
    from cachelab.traces import (
        RequestTrace,
        SynthParams,
        load_request_trace,
        save_request_trace,
        synthesize,
    )

# The verbs load on first use: ``import cachelab.simulation.flat`` need not import numpy.
__getattr__, __dir__ = exports(__name__, {
    "cachelab.profiles": ("LatencyProfile", "ProfileSpec", "load_profile", "profile"),
    "cachelab.simulation": ("SimulateSpec", "SimulationResult", "simulate"),
    "cachelab.traces": (
        "RequestTrace", "SynthParams", "load_request_trace", "save_request_trace", "synthesize",
    ),
})

__all__ = [
    "CachelabError",
    "LatencyProfile",
    "ProfileSpec",
    "RequestTrace",
    "SimulateSpec",
    "SimulationResult",
    "SynthParams",
    "__version__",
    "load_profile",
    "load_request_trace",
    "profile",
    "save_request_trace",
    "simulate",
    "synthesize",
]
