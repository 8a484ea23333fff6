"""A synthetic content-site request trace, shaped like the one in the seed post.

Khan Academy's content is a tree — domains → subjects → topics → tutorials → items (videos,
exercises, articles) — and a page touches many catalog items: a topic page its descendants,
an item page its breadcrumbs and the tutorial it sits in; the API calls those pages make touch
the item they are about. :func:`synthesize` builds such a catalog and a day of requests from
:class:`SynthParams`; the same parameters (seed included) always give the same trace, to the
byte once written. :func:`synth_parts` makes the same requests in parts and
:func:`write_synth` writes each part as it is made (``cachelab trace synth``), in memory that
holds the catalog and one part whatever the number of requests; the part size changes
nothing in the trace (every request quantity draws from its own random stream). The model,
every parameter and its default are documented in ``docs/traces.md`` ("The synthetic
trace").

The defaults are the preset ``appengine-article``: calibrated so that the default strategies
under the ``appengine-2017`` latency model land on the aggregates Khan Academy's article
reports (docs/simulation.md, "What the default run shows"). :data:`PRESETS` also keeps
``heavy-pages``, the shape before that calibration.

Everything is numpy-vectorised (per part) except the walk that builds each page's touch list
once (a few thousand pages), so 100,000 requests take about a second.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

import cachelab._core as _core
from cachelab.errors import UsageError
from cachelab.traces.formats import save_request_parts
from cachelab.traces.request import RequestTrace
from cachelab.units import check_limit, limit, limited, limits_of

__all__ = [
    "DEFAULT_PRESET",
    "GENERATOR_NAME",
    "LIMITS",
    "PRESETS",
    "ROUTES",
    "SynthParams",
    "SYNTH_PART",
    "SYNTH_PART_LIMIT",
    "SynthParts",
    "concatenate",
    "render_synth_summary",
    "synth_parts",
    "synth_summary",
    "synthesize",
    "write_synth",
]

GENERATOR_NAME = "cachelab.synth"

#: Levels of the content tree, root first; a node's kind is its level's name, except the leaves
#: (content items), whose kind is drawn from ``SynthParams.kind_mix``.
LEVELS = ("domain", "subject", "topic", "tutorial")
ITEM_KINDS = ("video", "exercise", "article")

#: Routes (page types), in the order their requests are drawn. ``api``: a call a content page
#: makes (progress, an answer), which touches the global items and the one item it is about.
ROUTES = ("home", "dashboard", "domain", "subject", "topic", "tutorial", *ITEM_KINDS, "api")


def _default_route_mix() -> dict[str, float]:
    # calibrated to the seed article (docs/traces.md, "Calibrated to the article")
    return {
        "home": 0.01, "dashboard": 0.03, "domain": 0.01, "subject": 0.02, "topic": 0.03,
        "tutorial": 0.03, "video": 0.135, "exercise": 0.105, "article": 0.03, "api": 0.60,
    }


def _default_base_ms_by_route() -> dict[str, float]:
    # medians (ms) of the routes that differ from base_ms_median (the content pages')
    return {
        "home": 650.0, "dashboard": 130.0, "domain": 220.0, "subject": 220.0, "topic": 220.0,
        "api": 65.0,
    }


def _default_kind_mix() -> dict[str, float]:
    return {"video": 0.45, "exercise": 0.35, "article": 0.20}


def _default_sizes() -> dict[str, list[float]]:
    # kind -> [median bytes, sigma of the log]; lognormal, rounded, clipped to [1, max_item_size]
    return {
        "global": [20_000, 0.5],
        "domain": [3_000, 0.5],
        "subject": [2_500, 0.5],
        "topic": [2_000, 0.6],
        "tutorial": [1_200, 0.6],
        "video": [1_800, 0.8],
        "exercise": [6_000, 1.0],
        "article": [12_000, 1.2],
    }


@dataclass
class SynthParams:
    """Parameters of :func:`synthesize`; see docs/traces.md for the model they drive."""

    #: Requests to generate.
    requests: int = limited(100_000, 0, 100_000_000)
    #: Seed of every random draw (tree shape, sizes, popularity, requests): the engines' range
    #: (u64), as every verb's ``--seed`` (numpy's ``SeedSequence`` takes any).
    seed: int = limited(1, 0, _core.LOAD_LIMITS["seed"]["hi"])
    # -- the content tree (counts per parent are 1 + Poisson(mean - 1)) --
    domains: int = 6
    subjects_per_domain: float = 5.0
    topics_per_subject: float = 6.0
    tutorials_per_topic: float = 5.0
    items_per_tutorial: float = 7.0
    #: Share of each kind among content items (leaves).
    kind_mix: dict[str, float] = field(default_factory=_default_kind_mix)
    #: Item size by kind: [median bytes, sigma of the log] of a lognormal.
    sizes: dict[str, list[float]] = field(default_factory=_default_sizes)
    #: Sizes are capped here (memcached's default item size limit).
    max_item_size: int = 1_000_000
    #: Keys touched by every request (site settings, navigation, feature flags): global:0, ...
    global_items: int = 2
    # -- popularity --
    #: Zipf exponent of page popularity within each route: weight of rank r is r^-alpha.
    alpha: float = limited(1.25, 0.0, 5.0)
    #: Popularity is inherited down the tree: a node's score is its parent's times a
    #: lognormal factor with this sigma (a domain's factor has sigma 1); pages are ranked by
    #: score. 0 = children of the most popular parent are the most popular pages.
    popularity_noise: float = 1.0
    #: Share of requests per route (page type); normalised to sum to 1.
    route_mix: dict[str, float] = field(default_factory=_default_route_mix)
    # -- what pages touch --
    #: A domain, subject or topic page touches descendants down to this many levels.
    topic_page_depth: int = 2
    #: The homepage touches the domains, subjects and this many most popular content items.
    home_items: int = 24
    #: A dashboard touches the domains and 1 + Poisson(mean - 1) content items drawn
    #: uniformly at random (the user's own progress).
    dashboard_items: float = 12.0
    # -- timing --
    #: Requests spread over this many seconds from t = 0.
    duration_s: float = limited(86_400.0, 0.0, 366 * 86_400.0, above=True, unit="seconds")
    #: Rate ∝ 1 + amplitude·cos(2π(t - peak)/1 day); peak/trough ratio (1+a)/(1-a).
    diurnal_amplitude: float = 0.6
    #: Hour of the day (0-24, t = 0 is midnight) at which the rate peaks.
    peak_hour: float = 15.0
    #: App instances serving requests.
    instances: int = limited(8, 1, 100_000)
    #: "random" (uniform) or "round-robin" (in time order) assignment to instances.
    assignment: str = "random"
    #: Base latency (without memcached) is lognormal with this median (ms) and sigma...
    base_ms_median: float = 600.0
    base_ms_sigma: float = 0.8
    #: ...except for the routes named here, which have their own median (ms).
    base_ms_by_route: dict[str, float] = field(default_factory=_default_base_ms_by_route)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> SynthParams:
        """The parameters of preset ``name`` (see :data:`PRESETS`), with ``overrides``."""
        if name not in PRESETS:
            raise UsageError(f"unknown synth preset {name!r}; presets: {', '.join(PRESETS)}")
        return cls(**{**copy.deepcopy(PRESETS[name]), **overrides})

    @classmethod
    def quick(cls, **overrides: Any) -> SynthParams:
        """The same shape, smaller: 10,000 requests."""
        return cls(**{"requests": 10_000, **overrides})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SynthParams:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise UsageError(f"unknown synth parameter(s): {', '.join(unknown)}")
        defaults = cls()
        values: dict[str, Any] = {}
        for name, value in d.items():
            default = getattr(defaults, name)
            if isinstance(default, int):
                ok = type(value) is int
                want = "an integer"
            elif isinstance(default, float):
                ok = type(value) in (int, float)
                want = "a number"
                value = float(value) if ok else value
            elif isinstance(default, str):
                ok, want = type(value) is str, "a string"
            else:  # dict of numbers (shares, medians) or of [median, sigma]
                numbers = name.endswith("_mix") or name == "base_ms_by_route"
                ok = isinstance(value, dict) and all(
                    isinstance(k, str) and (
                        type(v) in (int, float) if numbers
                        else isinstance(v, list) and all(type(x) in (int, float) for x in v)
                    ) for k, v in value.items()
                )
                want = ("an object of name: share" if name.endswith("_mix")
                        else "an object of route: median ms" if numbers
                        else "an object of kind: [median bytes, sigma]")
            if not ok:
                raise UsageError(f"synth parameter {name} must be {want}, not {value!r}")
            values[name] = value
        return cls(**values)

    def check(self) -> None:
        """Raises UsageError naming the first bad parameter."""
        def need(ok: bool, message: str) -> None:
            if not ok:
                raise UsageError(message)

        for name, bounds in LIMITS.items():
            check_limit(name, bounds, getattr(self, name), dashes=False)
        need(1 <= self.domains <= 10_000, "domains must be between 1 and 10,000")
        for name in ("subjects_per_domain", "topics_per_subject", "tutorials_per_topic",
                     "items_per_tutorial"):
            value = getattr(self, name)
            need(1 <= value <= 1_000, f"{name} must be between 1 and 1000")
        need(set(self.kind_mix) <= set(ITEM_KINDS) and self.kind_mix != {},
             f"kind_mix keys must be among {', '.join(ITEM_KINDS)}")
        need(all(v >= 0 for v in self.kind_mix.values()) and sum(self.kind_mix.values()) > 0,
             "kind_mix shares must be >= 0 and not all 0")
        for kind in ("global", *LEVELS, *ITEM_KINDS):
            need(kind in self.sizes, f"sizes has no entry for {kind!r}")
        for kind, spec in self.sizes.items():
            need(len(spec) == 2 and spec[0] > 0 and spec[1] >= 0,
                 f"sizes[{kind!r}] must be [median bytes > 0, sigma >= 0]")
        need(1 <= self.max_item_size <= 2**40, "max_item_size must be between 1 and 2^40")
        need(0 <= self.global_items <= 1000, "global_items must be between 0 and 1000")
        need(0 <= self.popularity_noise <= 10, "popularity_noise must be between 0 and 10")
        need(set(self.route_mix) <= set(ROUTES),
             f"route_mix keys must be among {', '.join(ROUTES)}")
        need(all(v >= 0 for v in self.route_mix.values()) and sum(self.route_mix.values()) > 0,
             "route_mix shares must be >= 0 and not all 0")
        need(0 <= self.topic_page_depth <= 4, "topic_page_depth must be between 0 and 4")
        need(0 <= self.home_items <= 10_000, "home_items must be between 0 and 10,000")
        need(1 <= self.dashboard_items <= 10_000, "dashboard_items must be between 1 and 10,000")
        need(0 <= self.diurnal_amplitude < 1, "diurnal_amplitude must be in [0, 1)")
        need(0 <= self.peak_hour <= 24, "peak_hour must be between 0 and 24")
        need(self.assignment in ("random", "round-robin"),
             "assignment must be 'random' or 'round-robin'")
        need(0 < self.base_ms_median <= 1e6, "base_ms_median must be > 0")
        need(0 <= self.base_ms_sigma <= 5, "base_ms_sigma must be between 0 and 5")
        need(set(self.base_ms_by_route) <= set(ROUTES),
             f"base_ms_by_route keys must be among {', '.join(ROUTES)}")
        need(all(0 < v <= 1e6 for v in self.base_ms_by_route.values()),
             "base_ms_by_route medians must be > 0 (ms)")


#: The range of each field written beside it (those ``trace synth``'s flags set, which read
#: it); :meth:`SynthParams.check` checks these, and the other fields in its own words.
LIMITS = limits_of(SynthParams)


#: Named shapes of the synthetic site: the parameters each sets, the others keep their
#: defaults. ``appengine-article`` is the defaults, calibrated to the seed article's aggregates;
#: ``heavy-pages`` the shape before that calibration (no API calls, every page touches about
#: 21 items, a 40 ms base latency), kept to reproduce earlier results.
PRESETS: dict[str, dict[str, Any]] = {
    "appengine-article": {},
    "heavy-pages": {
        "alpha": 0.9,
        "route_mix": {
            "home": 0.06, "dashboard": 0.08, "domain": 0.02, "subject": 0.04, "topic": 0.08,
            "tutorial": 0.08, "video": 0.32, "exercise": 0.24, "article": 0.08,
        },
        "base_ms_median": 40.0,
        "base_ms_sigma": 0.7,
        "base_ms_by_route": {},
    },
}

#: The preset the defaults are.
DEFAULT_PRESET = "appengine-article"


# -- the catalog -----------------------------------------------------------------------------


@dataclass
class _Tree:
    keys: list[str]
    kinds: np.ndarray  # codes into kind_names
    kind_names: list[str]
    sizes: np.ndarray
    parent: np.ndarray  # catalog index of the parent, -1 for globals and domains
    child_offsets: np.ndarray
    child_items: np.ndarray
    level: np.ndarray  # -1 globals, 0 domain ... 3 tutorial, 4 content item
    score: np.ndarray  # popularity score (higher = more popular)


def _build_tree(p: SynthParams, rng: np.random.Generator) -> _Tree:
    means = (p.subjects_per_domain, p.topics_per_subject, p.tutorials_per_topic,
             p.items_per_tutorial)
    level_sizes = [p.domains]
    level_parent = [np.full(p.domains, -1, dtype=np.int64)]  # index within the previous level
    for mean in means:
        counts = 1 + rng.poisson(mean - 1, size=level_sizes[-1])
        level_parent.append(np.repeat(np.arange(level_sizes[-1]), counts))
        level_sizes.append(int(counts.sum()))
    base = np.cumsum([p.global_items, *level_sizes])  # catalog index where level L+1 starts
    starts = base[:-1].tolist()
    n = int(base[-1])

    kind_names = ["global", *LEVELS, *ITEM_KINDS]
    kinds = np.empty(n, dtype=np.uint32)
    level = np.empty(n, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    kinds[: p.global_items] = 0
    level[: p.global_items] = -1
    for lv in range(5):
        sl = slice(starts[lv], starts[lv] + level_sizes[lv])
        level[sl] = lv
        if lv > 0:
            parent[sl] = level_parent[lv] + starts[lv - 1]
        if lv < 4:
            kinds[sl] = 1 + lv
    n_items = level_sizes[4]
    mix = np.array([p.kind_mix.get(k, 0.0) for k in ITEM_KINDS], dtype=np.float64)
    kinds[starts[4]:] = 1 + len(LEVELS) + rng.choice(len(ITEM_KINDS), size=n_items,
                                                     p=mix / mix.sum())

    medians = np.array([p.sizes[k][0] for k in kind_names], dtype=np.float64)
    sigmas = np.array([p.sizes[k][1] for k in kind_names], dtype=np.float64)
    raw = medians[kinds] * np.exp(sigmas[kinds] * rng.standard_normal(n))
    sizes = np.clip(np.rint(raw), 1, p.max_item_size).astype(np.uint64)

    # popularity: inherited down the tree with lognormal noise. The domains' factors have sigma
    # 1 and every level below popularity_noise: with one sigma everywhere it could not change a
    # ranking (exp(sigma * a sum of normals) ranks the same for every sigma > 0).
    sigma = np.where(level == 0, 1.0, p.popularity_noise)
    noise = np.exp(sigma * rng.standard_normal(n))
    score = np.ones(n, dtype=np.float64)
    for lv in range(5):
        sl = slice(starts[lv], starts[lv] + level_sizes[lv])
        score[sl] = noise[sl] * (score[parent[sl]] if lv > 0 else 1.0)

    counts_all = np.zeros(n, dtype=np.int64)
    has_parent = parent >= 0
    np.add.at(counts_all, parent[has_parent], 1)
    child_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts_all, out=child_offsets[1:])
    # children of consecutive parents are consecutive, in catalog order
    child_items = np.flatnonzero(has_parent)
    order = np.argsort(parent[child_items], kind="stable")
    child_items = child_items[order]

    keys = [f"global:{i}" for i in range(p.global_items)]
    names = kind_names
    for lv in range(4):
        keys += [f"{LEVELS[lv]}:{i}" for i in range(level_sizes[lv])]
    leaf_kinds = kinds[starts[4]:].tolist()
    keys += [f"{names[k]}:{i}" for i, k in enumerate(leaf_kinds)]
    return _Tree(keys, kinds, kind_names, sizes, parent, child_offsets,
                 child_items.astype(np.int64), level, score)


# -- pages -----------------------------------------------------------------------------------


def _ancestors(tree: _Tree, node: int) -> list[int]:
    out = []
    up = int(tree.parent[node])
    while up >= 0:
        out.append(up)
        up = int(tree.parent[up])
    out.reverse()
    return out


def _descendants(tree: _Tree, node: int, depth: int, out: list[int]) -> None:
    """Pre-order: each child, then its descendants, down to ``depth`` levels below ``node``."""
    if depth <= 0:
        return
    lo, hi = int(tree.child_offsets[node]), int(tree.child_offsets[node + 1])
    for child in tree.child_items[lo:hi].tolist():
        out.append(child)
        _descendants(tree, child, depth - 1, out)


def _by_popularity(tree: _Tree, members: np.ndarray) -> np.ndarray:
    """``members`` most popular first (ties broken by catalog order)."""
    return members[np.lexsort((members, -tree.score[members]))]


def _pages(tree: _Tree, p: SynthParams) -> tuple[dict[str, np.ndarray], list[list[int]]]:
    """Candidate pages of every route (most popular first) and each page's touch list.

    Page ids index the touch lists: page 0 is the homepage, page 1 the dashboard (its fixed
    part), then one page per tree node, then one API call per content item.
    """
    glob = list(range(p.global_items))
    domains = np.flatnonzero(tree.level == 0).tolist()
    subjects = np.flatnonzero(tree.level == 1).tolist()
    leaves = np.flatnonzero(tree.level == 4)
    top_items = _by_popularity(tree, leaves)[: p.home_items].tolist()
    lists: list[list[int]] = [glob + domains + subjects + top_items, glob + domains]
    candidates: dict[str, np.ndarray] = {"home": np.array([0]), "dashboard": np.array([1])}
    page_of_node = np.full(len(tree.keys), -1, dtype=np.int64)
    for node in np.flatnonzero(tree.level >= 0).tolist():
        lv = int(tree.level[node])
        # A page handler loads its own node first, then what it renders below it, then the
        # breadcrumbs (ancestors, nearest first).
        page = glob + [node]
        ancestors = _ancestors(tree, node)[::-1]
        if lv == 4:
            up = ancestors.pop(0)  # the tutorial: then its items (siblings, itself again)
            lo, hi = int(tree.child_offsets[up]), int(tree.child_offsets[up + 1])
            page += [up, *tree.child_items[lo:hi].tolist()]
        else:
            _descendants(tree, node, 1 if lv == 3 else p.topic_page_depth, page)
        page += ancestors
        page_of_node[node] = len(lists)
        lists.append(page)
    kind_of = np.array(tree.kind_names, dtype=object)[tree.kinds]
    for route in ROUTES[2:-1]:
        nodes = np.flatnonzero((kind_of == route) & (tree.level >= 0))
        candidates[route] = page_of_node[_by_popularity(tree, nodes)]
    # api: one page per content item, ranked like the item's own page
    ranked = _by_popularity(tree, leaves).tolist()
    candidates["api"] = np.arange(len(lists), len(lists) + len(ranked), dtype=np.int64)
    lists += [glob + [leaf] for leaf in ranked]
    return candidates, lists


# -- requests --------------------------------------------------------------------------------

#: Requests per part of :func:`synth_parts` by default: parts of this many requests are made
#: and written one after another, so writing a trace holds the catalog and one part (about
#: 250 MiB at peak for the default shape, most of it the interpreter and pyarrow), whatever the
#: number of requests. One part is one Parquet row group (``parquet.ROW_GROUP``).
SYNTH_PART = 1 << 16
#: The requests a part may hold (``trace synth --part``).
SYNTH_PART_LIMIT = limit(1, 100_000_000)

#: The independent streams of the requests' random draws, one child of
#: ``SeedSequence(seed)`` each, in this order. Each quantity draws from its own stream in
#: request order, so the requests do not depend on how they are cut into parts.
_STREAMS = ("route", "page", "dashboard", "extra", "time", "instance", "base")


def _cdf(weights: np.ndarray) -> np.ndarray:
    cdf = np.cumsum(weights, dtype=np.float64)
    return cdf / cdf[-1]


def _pick(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Indices drawn with the weights of ``cdf`` from uniforms ``u`` in [0, 1)."""
    return np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1)


@dataclass
class _Model:
    """What every part draws from: the pages, their touch lists and the draw tables."""

    route_cdf: np.ndarray
    page_cdfs: list[np.ndarray | None]  # per route: Zipf over its candidate pages
    candidates: list[np.ndarray]
    page_len: np.ndarray
    page_off: np.ndarray
    page_items: np.ndarray
    leaves: np.ndarray
    route_medians: np.ndarray
    time_grid: np.ndarray
    time_cdf: np.ndarray


def _model(tree: _Tree, p: SynthParams) -> _Model:
    candidates, page_lists = _pages(tree, p)
    mix = np.array([p.route_mix.get(r, 0.0) for r in ROUTES], dtype=np.float64)
    for i, r in enumerate(ROUTES):  # a route without pages gets no requests
        if len(candidates[r]) == 0:
            mix[i] = 0.0
    if mix.sum() <= 0:
        raise UsageError("route_mix gives no weight to any route that has pages")
    page_cdfs = [
        _cdf(np.arange(1, len(candidates[r]) + 1, dtype=np.float64) ** -p.alpha)
        if len(candidates[r]) else None for r in ROUTES
    ]
    page_len = np.array([len(t) for t in page_lists], dtype=np.int64)
    page_off = np.zeros(len(page_lists) + 1, dtype=np.int64)
    np.cumsum(page_len, out=page_off[1:])
    page_items = np.fromiter((i for t in page_lists for i in t), dtype=np.int64,
                             count=int(page_off[-1]))
    grid = np.linspace(0.0, p.duration_s, 8193)
    rate = 1.0 + p.diurnal_amplitude * np.cos(2 * np.pi * (grid / 86_400.0 - p.peak_hour / 24))
    tcdf = np.concatenate([[0.0], np.cumsum((rate[1:] + rate[:-1]) / 2 * np.diff(grid))])
    tcdf /= tcdf[-1]
    return _Model(
        route_cdf=_cdf(mix), page_cdfs=page_cdfs, candidates=[candidates[r] for r in ROUTES],
        page_len=page_len, page_off=page_off, page_items=page_items,
        leaves=np.flatnonzero(tree.level == 4),
        route_medians=np.array([p.base_ms_by_route.get(r, p.base_ms_median) for r in ROUTES],
                               dtype=np.float64),
        time_grid=grid, time_cdf=tcdf,
    )


def _ragged(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows of ``lengths``: the row of every element and its position within its row."""
    row = np.repeat(np.arange(len(lengths)), lengths)
    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    return row, np.arange(int(starts[-1])) - starts[row]


class SynthParts:
    """A synthetic trace made part by part: :attr:`catalog` (a trace without requests, its
    header included) and :meth:`parts`, traces over that catalog holding ``part_requests``
    consecutive requests each (the last fewer). The parts put end to end are the trace
    :func:`synthesize` returns, whatever the part size."""

    def __init__(self, params: SynthParams, part_requests: int = SYNTH_PART) -> None:
        params.check()
        check_limit("part_requests", SYNTH_PART_LIMIT, part_requests, dashes=False)
        self.params = params
        self.part_requests = int(part_requests)
        self.n_requests = params.requests
        #: Touches in the parts made so far.
        self.touches = 0
        # the catalog draws from the seed itself, as before the requests were made in parts
        # (so the catalog of a seed is unchanged); the requests from children of the seed
        seeds = np.random.SeedSequence(params.seed).spawn(len(_STREAMS))
        self._seeds = dict(zip(_STREAMS, seeds, strict=True))
        self._tree = _build_tree(params, np.random.default_rng(params.seed))
        self._model = _model(self._tree, params)
        t = self._tree
        self.catalog = RequestTrace(
            item_keys=t.keys, item_sizes=t.sizes, item_kinds=t.kinds, kind_names=t.kind_names,
            child_offsets=t.child_offsets, child_items=t.child_items,
            request_ids=np.zeros(0, np.int64), time=np.zeros(0),
            instance=np.zeros(0, np.uint32), route=np.zeros(0, np.uint32), route_names=[],
            base_ms=np.zeros(0), touch_offsets=np.zeros(1, np.uint64),
            touch_items=np.zeros(0, np.uint32),
            generator={"name": GENERATOR_NAME, "params": params.to_dict()},
        )

    def parts(self) -> Iterator[RequestTrace]:
        """The requests, in parts, in order (each call starts again from the first)."""
        rngs = {name: np.random.default_rng(seed) for name, seed in self._seeds.items()}
        self.touches = 0
        carry = 0.0  # the running sum behind the sorted times (see _part)
        for first in range(0, self.n_requests, self.part_requests):
            part, carry = self._part(first, min(self.part_requests, self.n_requests - first),
                                     rngs, carry)
            self.touches += part.n_touches
            yield part

    def _part(self, first: int, m: int, rngs: dict[str, np.random.Generator],
              carry: float) -> tuple[RequestTrace, float]:
        p, md = self.params, self._model
        n = self.n_requests
        route = _pick(md.route_cdf, rngs["route"].random(m)).astype(np.uint32)
        u = rngs["page"].random(m)  # one draw per request, used by its route's table
        page = np.zeros(m, dtype=np.int64)
        for i, cdf in enumerate(md.page_cdfs):
            where = np.flatnonzero(route == i)
            if len(where) and cdf is not None:
                page[where] = md.candidates[i][_pick(cdf, u[where])]

        # touches: the page's fixed list, then (dashboards) random content items
        dash = route == ROUTES.index("dashboard")
        extra = np.zeros(m, dtype=np.int64)
        extra[dash] = 1 + rngs["dashboard"].poisson(p.dashboard_items - 1, size=int(dash.sum()))
        pick = rngs["extra"].random(int(extra.sum())) * len(md.leaves)
        extra_items = md.leaves[np.minimum(pick.astype(np.int64), len(md.leaves) - 1)]
        fixed = md.page_len[page]
        offsets = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(fixed + extra, out=offsets[1:])
        touches = np.empty(int(offsets[-1]), dtype=np.uint32)
        req_of, j = _ragged(fixed)
        touches[offsets[req_of] + j] = md.page_items[md.page_off[page[req_of]] + j]
        req_of, j = _ragged(extra)
        touches[offsets[req_of] + fixed[req_of] + j] = extra_items

        # times: the sorted uniforms of n draws, made in order. With E_k exponential,
        # 1 - U_(k) = exp(-sum_{j<=k} E_j / (n - j)) (Rényi), so each part continues the
        # running sum; prepending ``carry`` keeps the additions those of one whole cumsum.
        k = np.arange(first, first + m, dtype=np.float64)
        steps = rngs["time"].standard_exponential(m) / (n - k)
        sums = np.cumsum(np.concatenate([[carry], steps]))
        time = np.round(np.interp(-np.expm1(-sums[1:]), md.time_cdf, md.time_grid), 6)
        if p.assignment == "random":
            instance = (rngs["instance"].random(m) * p.instances).astype(np.uint32)
            np.minimum(instance, p.instances - 1, out=instance)
        else:
            instance = (np.arange(first, first + m) % p.instances).astype(np.uint32)
        base = md.route_medians[route] * np.exp(p.base_ms_sigma * rngs["base"].standard_normal(m))
        base_ms = np.maximum(np.round(base, 3), 0.001)

        # name only the routes that occur in the part, in ROUTES order
        used = np.flatnonzero(np.bincount(route, minlength=len(ROUTES)))
        recode = np.zeros(len(ROUTES), dtype=np.uint32)
        recode[used] = np.arange(len(used), dtype=np.uint32)
        c = self.catalog
        part = RequestTrace(
            item_keys=c.item_keys, item_sizes=c.item_sizes, item_kinds=c.item_kinds,
            kind_names=c.kind_names, child_offsets=c.child_offsets, child_items=c.child_items,
            request_ids=np.arange(first, first + m, dtype=np.int64), time=time,
            instance=instance, route=recode[route], route_names=[ROUTES[i] for i in used],
            base_ms=base_ms, touch_offsets=offsets, touch_items=touches,
            generator=c.generator,
        )
        return part, float(sums[-1])


def synth_parts(params: SynthParams | None = None,
                part_requests: int = SYNTH_PART) -> SynthParts:
    """A synthetic request trace to be made part by part (see :class:`SynthParts`)."""
    return SynthParts(params if params is not None else SynthParams(), part_requests)


def write_synth(params: SynthParams, path: str | os.PathLike[str], format: str | None = None,
                part_requests: int = SYNTH_PART,
                on_progress: Callable[[int, int], None] | None = None) -> SynthParts:
    """Writes the synthetic trace of ``params`` to ``path`` (JSONL or Parquet, atomically)
    part by part: each part is written as it is made, so memory holds the catalog and one
    part. ``on_progress(done, total)`` is called with the requests written after each part.
    Returns the :class:`SynthParts`, whose counts then cover the whole trace."""
    stream = synth_parts(params, part_requests)

    def parts() -> Iterator[RequestTrace]:
        done = 0
        if on_progress is not None:
            on_progress(0, stream.n_requests)
        for part in stream.parts():
            yield part
            done += part.n_requests
            if on_progress is not None:
                on_progress(done, stream.n_requests)

    save_request_parts(stream.catalog, parts(), path, format)
    return stream


def concatenate(catalog: RequestTrace, parts: Iterable[RequestTrace]) -> RequestTrace:
    """The requests of ``parts`` (traces over ``catalog``) end to end as one trace; route
    names are those of the parts, in order of first appearance."""
    names: list[str] = []
    cols: dict[str, list[np.ndarray]] = {k: [] for k in (
        "request_ids", "time", "instance", "route", "base_ms", "touch_items")}
    lengths: list[np.ndarray] = []
    for part in parts:
        for r in part.route_names:
            if r not in names:
                names.append(r)
        recode = np.array([names.index(r) for r in part.route_names], dtype=np.uint32)
        for k, acc in cols.items():
            acc.append(recode[part.route] if k == "route" else getattr(part, k))
        lengths.append(np.diff(part.touch_offsets))
    offsets = np.zeros(sum(len(x) for x in lengths) + 1, dtype=np.uint64)
    if lengths:
        np.cumsum(np.concatenate(lengths), out=offsets[1:])
    joined = {k: (np.concatenate(v) if v else getattr(catalog, k)) for k, v in cols.items()}
    return RequestTrace(
        item_keys=catalog.item_keys, item_sizes=catalog.item_sizes,
        item_kinds=catalog.item_kinds, kind_names=catalog.kind_names,
        child_offsets=catalog.child_offsets, child_items=catalog.child_items,
        route_names=names, touch_offsets=offsets, generator=catalog.generator, **joined,
    )


def synthesize(params: SynthParams | None = None,
               part_requests: int | None = None) -> RequestTrace:
    """A synthetic request trace; deterministic for given parameters (seed included), and
    the same whatever ``part_requests`` (default: all requests in one part) it is made in."""
    p = params if params is not None else SynthParams()
    stream = synth_parts(p, part_requests or max(p.requests, 1))
    parts = list(stream.parts())
    if len(parts) == 1:
        return parts[0]
    return concatenate(stream.catalog, parts)


def synth_summary(trace: RequestTrace | SynthParts, params: SynthParams, path: object,
                  preset: str = DEFAULT_PRESET) -> dict[str, Any]:
    """What ``cachelab trace synth`` reports: where the trace went, its sizes, the preset it
    started from and every parameter (of a :class:`SynthParts`: after its parts were made)."""
    if isinstance(trace, SynthParts):
        counts = (trace.n_requests, trace.catalog.n_items, trace.touches)
    else:
        counts = (trace.n_requests, trace.n_items, trace.n_touches)
    return {
        "path": str(path),
        "requests": counts[0],
        "catalog_items": counts[1],
        "touches": counts[2],
        "preset": preset,
        "params": params.to_dict(),
    }


def render_synth_summary(summary: dict[str, Any]) -> str:
    """The one line ``cachelab trace synth`` prints on a terminal."""
    return (f"{summary['requests']:,} requests, {summary['catalog_items']:,} catalog items, "
            f"{summary['touches']:,} touches (preset {summary['preset']}, "
            f"seed {summary['params']['seed']})")
