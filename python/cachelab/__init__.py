"""cachelab: measure, model and simulate memcached.

Each verb is a package named after it (``cachelab.profile``, ``cachelab.simulate``, ...) and a
command of the ``cachelab`` CLI:

>>> import cachelab
>>> result = cachelab.profile.run(cachelab.ProfileSpec(samples=1000))  # a private memcached
>>> result.table("get")                                                # doctest: +SKIP
>>> trace = cachelab.synthesize(cachelab.SynthParams(requests=10_000))
>>> cachelab.simulate.run(cachelab.SimulateSpec(strategies=("none", "fixed:500")), trace=trace)

Every verb's entry is ``cachelab.<verb>.run(spec, target=None, *, progress=None, ...)``; the
target (:class:`cachelab.Target`, or an address) is the server, pool or proxy to drive — by
default a private memcached::

    cachelab.load.run(spec, cachelab.Target(servers=("10.0.0.1:11211", "10.0.0.2:11211")))

Errors are the classes in :mod:`cachelab.errors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cachelab._core import __version__
from cachelab._lazy import exports
from cachelab.errors import CachelabError

if TYPE_CHECKING:
    from cachelab.profile import LatencyProfile, ProfileSpec, load_profile
    from cachelab.simulate import SimulateSpec, SimulationResult
    from cachelab.target import Target
    from cachelab.traces import (
        RequestTrace,
        SynthParams,
        load_request_trace,
        save_request_trace,
        synthesize,
    )

# The verbs load on first use: ``import cachelab.simulate.flat`` need not import numpy.
__getattr__, __dir__ = exports(__name__, {
    "cachelab.profile": ("LatencyProfile", "ProfileSpec", "load_profile"),
    "cachelab.simulate": ("SimulateSpec", "SimulationResult"),
    "cachelab.target": ("Target",),
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
    "Target",
    "__version__",
    "load_profile",
    "load_request_trace",
    "save_request_trace",
    "synthesize",
]
