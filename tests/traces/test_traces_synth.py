"""The synthetic trace: determinism, the content tree, what pages touch, popularity, timing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cachelab.errors import UsageError
from cachelab.traces import (
    RequestTrace,
    SynthParams,
    load_request_trace,
    save_request_trace,
    synthesize,
)
from cachelab.traces.inspect import inspect_request_trace
from cachelab.traces.synth import synth_parts, write_synth

SMALL = 20_000


@pytest.fixture(scope="module")
def trace() -> RequestTrace:
    return synthesize(SynthParams(requests=SMALL, seed=11))


def parents(t: RequestTrace) -> np.ndarray:
    parent = np.full(t.n_items, -1, dtype=np.int64)
    for i in range(t.n_items):
        parent[t.children(i)] = i
    return parent


def ancestors(parent: np.ndarray, i: int) -> list[int]:
    out = []
    while parent[i] >= 0:
        i = int(parent[i])
        out.append(i)
    return out[::-1]


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    params = dict(requests=3000)
    a = save_request_trace(synthesize(SynthParams(seed=4, **params)), tmp_path / "a.jsonl")
    b = save_request_trace(synthesize(SynthParams(seed=4, **params)), tmp_path / "b.jsonl")
    c = save_request_trace(synthesize(SynthParams(seed=5, **params)), tmp_path / "c.jsonl")
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


@pytest.mark.parametrize("part", [1, 7, 1000, 2999])
def test_the_requests_do_not_depend_on_the_part_size(part: int) -> None:
    # each quantity draws from its own stream, in request order; the sorted times continue
    # one running sum across parts
    params = SynthParams(requests=3000, seed=8, assignment="random")
    assert synthesize(params, part_requests=part).equals(synthesize(params))


def test_parts_are_consecutive_requests_in_time_order() -> None:
    made = synth_parts(SynthParams(requests=2500, seed=2), part_requests=1000)
    parts = list(made.parts())
    assert [p.n_requests for p in parts] == [1000, 1000, 500]
    assert np.concatenate([p.request_ids for p in parts]).tolist() == list(range(2500))
    times = np.concatenate([p.time for p in parts])
    assert times[0] >= 0 and np.all(np.diff(times) >= 0) and times[-1] <= 86_400
    assert made.touches == sum(p.n_touches for p in parts)
    assert all(p.item_keys == made.catalog.item_keys for p in parts)
    assert made.catalog.n_requests == 0 and made.catalog.generator == parts[0].generator


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_written_part_by_part_it_is_the_whole_trace(tmp_path: Path, fmt: str) -> None:
    params = SynthParams(requests=2500, seed=6)
    whole = synthesize(params)
    seen: list[tuple[int, int]] = []
    made = write_synth(params, tmp_path / f"t.{fmt}", part_requests=999,
                       on_progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 2500), (999, 2500), (1998, 2500), (2500, 2500)]
    assert made.touches == whole.n_touches
    back = load_request_trace(tmp_path / f"t.{fmt}")
    assert back.equals(whole)
    if fmt == "jsonl":  # byte for byte
        ref = save_request_trace(whole, tmp_path / "whole.jsonl")
        assert (tmp_path / "t.jsonl").read_bytes() == ref.read_bytes()


def test_header_records_the_parameters(trace: RequestTrace) -> None:
    assert trace.generator is not None
    assert trace.generator["name"] == "cachelab.synth"
    assert SynthParams.from_dict(trace.generator["params"]) == SynthParams(requests=SMALL,
                                                                           seed=11)


def test_tree_has_five_levels_with_kinds(trace: RequestTrace) -> None:
    trace.check()
    parent = parents(trace)
    kind = np.array(trace.kind_names, dtype=object)[trace.item_kinds]
    path_kinds = ["domain", "subject", "topic", "tutorial"]
    for i in range(trace.n_items):
        up = [kind[a] for a in ancestors(parent, i)]
        k = kind[i]
        if k == "global":
            assert up == []
        elif k in ("video", "exercise", "article"):
            assert up == path_kinds
            assert len(trace.children(i)) == 0
        else:
            assert up == path_kinds[: path_kinds.index(k)]
            assert len(trace.children(i)) >= 1  # every inner node has at least one child
    counts = {k: int((kind == k).sum()) for k in set(kind)}
    assert counts["domain"] == 6 and counts["global"] == 2
    assert counts["video"] > counts["exercise"] > counts["article"] > 0


def test_sizes_are_capped_and_by_kind(trace: RequestTrace) -> None:
    assert int(trace.item_sizes.min()) >= 1 and int(trace.item_sizes.max()) <= 1_000_000
    kind = np.array(trace.kind_names, dtype=object)[trace.item_kinds]
    med = {k: float(np.median(trace.item_sizes[kind == k])) for k in ("video", "article")}
    assert 1_200 < med["video"] < 2_700 and 8_000 < med["article"] < 18_000
    tiny_cap = synthesize(SynthParams(requests=10, max_item_size=5000))
    assert int(tiny_cap.item_sizes.max()) == 5000


def _descendants(t: RequestTrace, node: int, depth: int) -> set[int]:
    out: set[int] = set()
    frontier = [node]
    for _ in range(depth):
        frontier = [int(c) for f in frontier for c in t.children(f)]
        out.update(frontier)
    return out


def test_pages_touch_what_their_route_says(trace: RequestTrace) -> None:
    parent = parents(trace)
    kind = np.array(trace.kind_names, dtype=object)[trace.item_kinds]
    glob = {i for i in range(trace.n_items) if kind[i] == "global"}
    domains = {i for i in range(trace.n_items) if kind[i] == "domain"}
    seen = set()
    for r in range(0, trace.n_requests, 7):
        route = trace.route_name(r)
        touched = trace.touches(r).tolist()
        got = set(touched)
        assert got >= glob
        if route in ("domain", "subject", "topic", "tutorial"):
            node = next(i for i in touched if kind[i] == route)
            depth = 1 if route == "tutorial" else 2
            want = glob | set(ancestors(parent, node)) | {node} | _descendants(trace, node, depth)
            assert got == want, route
        elif route in ("video", "exercise", "article"):
            item = touched[len(glob)]
            assert kind[item] == route
            tutorial = int(parent[item])
            want = glob | set(ancestors(parent, item)) | set(trace.children(tutorial).tolist())
            assert got == want
            assert touched.count(item) == 2  # loaded, then listed in its tutorial
        elif route == "home":
            assert got >= domains and len(touched) == len(got)
        elif route == "api":
            assert len(touched) == len(glob) + 1 and kind[touched[-1]] in ("video", "exercise",
                                                                           "article")
        else:
            assert route == "dashboard"
            assert got >= domains
        seen.add(route)
    assert seen == {"home", "dashboard", "domain", "subject", "topic", "tutorial", "video",
                    "exercise", "article", "api"}


def test_topic_pages_touch_dozens_of_items(trace: RequestTrace) -> None:
    per = trace.touches_per_request()
    topic = trace.route_names.index("topic")
    video = trace.route_names.index("video")
    assert per[trace.route == topic].mean() > 2 * per[trace.route == video].mean()
    assert per.max() >= 60


def test_zipf_popular_pages_dominate(trace: RequestTrace) -> None:
    video = trace.route_names.index("video")
    rows = np.flatnonzero(trace.route == video)
    n_glob = 2
    pages = trace.touch_items[trace.touch_offsets[rows].astype(np.int64) + n_glob]
    counts = np.sort(np.bincount(pages))[::-1]
    n_videos = int((np.array(trace.kind_names)[trace.item_kinds] == "video").sum())
    top = max(1, n_videos // 100)
    # under alpha = 1.25 the top 1 % of videos get ~ 60 % of video page views (0.9: ~ 30 %);
    # uniform: 1 %
    assert counts[:top].sum() / len(rows) > 0.3


def test_popularity_noise_sets_how_much_pages_inherit_their_domains_popularity() -> None:
    """A smaller sigma ranks pages more by their ancestors: video page views crowd into the
    most viewed domain. (With one sigma at every level, a ranking of exp(sigma * a sum of
    normals) would be the same for every sigma > 0.)"""
    def top_domain_share(noise: float) -> float:
        t = synthesize(SynthParams(requests=4000, seed=3, popularity_noise=noise))
        parent = parents(t)
        video = t.route_names.index("video")
        rows = np.flatnonzero(t.route == video)
        pages = t.touch_items[t.touch_offsets[rows].astype(np.int64) + 2]  # after the globals
        domains = [ancestors(parent, int(i))[0] for i in pages]
        return np.bincount(domains).max() / len(domains)

    shares = [top_domain_share(noise) for noise in (0.0, 0.3, 1.5)]
    # 0: every video of the most popular domain ranks above all others
    assert shares[0] > shares[1] > shares[2]


def test_alpha_orders_the_fitted_skew() -> None:
    fits = [inspect_request_trace(synthesize(SynthParams(requests=8000, alpha=a)))["zipf_alpha"]
            for a in (0.5, 0.9, 1.3)]
    assert fits[0] < fits[1] < fits[2]


def test_diurnal_rate_peaks_at_peak_hour(trace: RequestTrace) -> None:
    hours = np.bincount((trace.time // 3600).astype(int), minlength=24)
    assert len(hours) == 24 and trace.time.max() < 86_400 and trace.time.min() >= 0
    assert int(np.argmax(hours)) in (14, 15) and int(np.argmin(hours)) in (2, 3)
    # rate ratio peak/trough = 1.6 / 0.4 = 4
    assert hours[14:16].sum() > 2.5 * hours[2:4].sum()
    assert np.all(np.diff(trace.time) >= 0)
    flat = synthesize(SynthParams(requests=SMALL, diurnal_amplitude=0.0))
    fh = np.bincount((flat.time // 3600).astype(int), minlength=24)
    assert fh.max() < 1.3 * fh.min()


def test_instances_and_base_latency_by_route(trace: RequestTrace) -> None:
    assert set(trace.instance.tolist()) == set(range(8))
    assert float(trace.base_ms.min()) > 0
    p = SynthParams()
    for route in ("api", "topic", "video", "home"):
        want = p.base_ms_by_route.get(route, p.base_ms_median)
        got = float(np.median(trace.base_ms[trace.route == trace.route_names.index(route)]))
        assert 0.85 * want < got < 1.15 * want, route
    rr = synthesize(SynthParams(requests=100, instances=3, assignment="round-robin"))
    assert rr.instance.tolist() == [i % 3 for i in range(100)]


def test_presets_start_from_a_named_shape_and_take_overrides() -> None:
    assert SynthParams.preset("appengine-article") == SynthParams()
    heavy = SynthParams.preset("heavy-pages", requests=2000, seed=4)
    assert (heavy.requests, heavy.seed, heavy.alpha, heavy.base_ms_by_route) == (2000, 4, 0.9,
                                                                                  {})
    t = synthesize(heavy)
    assert "api" not in t.route_names  # page views only, each touching ~ 21 items
    assert t.touches_per_request().mean() > 2 * synthesize(SynthParams(
        requests=2000, seed=4)).touches_per_request().mean()
    assert 34 < float(np.median(t.base_ms)) < 46  # one 40 ms median for every route
    heavy.route_mix["api"] = 1.0  # a preset hands out copies
    assert "api" not in SynthParams.preset("heavy-pages").route_mix
    with pytest.raises(UsageError, match="unknown synth preset 'x'; presets: appengine-article"):
        SynthParams.preset("x")


def test_route_mix_is_followed() -> None:
    t = synthesize(SynthParams(requests=4000, route_mix={"topic": 3, "home": 1}))
    assert t.route_names == ["home", "topic"]
    share = np.bincount(t.route)[1] / t.n_requests
    assert 0.7 < share < 0.8


@pytest.mark.parametrize("bad", [
    dict(requests=-1), dict(alpha=-0.1), dict(instances=0), dict(assignment="sticky"),
    dict(diurnal_amplitude=1.0), dict(route_mix={"search": 1.0}), dict(kind_mix={}),
    dict(items_per_tutorial=0.5), dict(base_ms_by_route={"search": 50.0}),
    dict(base_ms_by_route={"api": 0.0}),
])
def test_bad_parameters_are_usage_errors(bad: dict) -> None:
    with pytest.raises(UsageError):
        synthesize(SynthParams(**bad))


def test_from_dict_checks_names_and_types() -> None:
    with pytest.raises(UsageError, match="unknown synth parameter"):
        SynthParams.from_dict({"requets": 5})
    with pytest.raises(UsageError, match="alpha must be a number"):
        SynthParams.from_dict({"alpha": "high"})
    with pytest.raises(UsageError, match="requests must be an integer"):
        SynthParams.from_dict({"requests": 5.5})
    assert SynthParams.from_dict({"alpha": 1}).alpha == 1.0
    with pytest.raises(UsageError, match="base_ms_by_route must be an object of route: median"):
        SynthParams.from_dict({"base_ms_by_route": {"api": "fast"}})
    assert SynthParams.from_dict({"base_ms_by_route": {"api": 50}}).base_ms_by_route == {
        "api": 50}
