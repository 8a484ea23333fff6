"""cachelab: measure, model and simulate memcached.

The verbs are functions here and commands of the ``cachelab`` CLI:

>>> import cachelab
>>> result = cachelab.profile(cachelab.ProfileSpec(samples=1000))   # a private memcached
>>> result.table("get")                                             # doctest: +SKIP

Errors are the classes in :mod:`cachelab.errors`.
"""

from __future__ import annotations

from cachelab._core import __version__
from cachelab.errors import CachelabError
from cachelab.profiles import LatencyProfile, ProfileSpec, load_profile, profile

__all__ = [
    "CachelabError",
    "LatencyProfile",
    "ProfileSpec",
    "__version__",
    "load_profile",
    "profile",
]
