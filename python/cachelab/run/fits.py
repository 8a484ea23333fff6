"""Whether a whole study fits a memcached cachelab did not start (:func:`check_study`), before
any step writes to it.

The steps run one after another and each deletes what it wrote, so the study needs what its
largest step needs; but every step must fit on its own (:mod:`cachelab.capacity`). A study
with a step that does not fit is refused, naming the step, the ``--steps`` that leave it out,
and ``--server`` (without it, the study gets a private memcached sized for it).
"""

from __future__ import annotations

from dataclasses import replace

from cachelab.capacity import EvictionWatch, ServerMemory, WontFit, Writes
from cachelab.load.footprint import load_writes
from cachelab.profile import profile_writes
from cachelab.replay import default_strategies
from cachelab.replay.footprint import replay_writes
from cachelab.run.result import RunSpec
from cachelab.run.steps import profile_spec, replay_setup, scale_spec, tiers_spec

__all__ = ["check_study", "step_writes"]


def _tiers(spec: RunSpec) -> Writes:
    """The tiers step: per data shape, the encoded value raw, with the codec and with each
    compression — counted at twice the larger shape's plain size (encodings add to it)."""
    t = tiers_spec(spec)
    size = 2 * max(t.record_bytes, t.list_items * t.item_bytes)
    return Writes("tiers", "values", "", "").add(size, 2 * (2 + len(t.compressions)))


def _replay(spec: RunSpec) -> Writes:
    """The replay step, with the strategy whose profile writes the most (a prefetch one):
    which one simulate picks is not known yet."""
    trace, _ = replay_setup(spec, ())
    n = default_strategies(trace.n_items)
    _, rspec = replay_setup(spec, ("none", n[-1]))
    return replay_writes(trace, rspec)


def step_writes(spec: RunSpec, name: str) -> Writes | None:
    """What step ``name`` of the study keeps in memcached at its peak; None for a step that
    writes nothing there (simulate)."""
    if name == "profile":
        return profile_writes(profile_spec(spec))
    if name == "scale":
        s = scale_spec(spec)
        return load_writes(s.run_spec(max(s.points)))
    if name == "tiers":
        return _tiers(spec)
    if name == "replay" and not spec.trace:
        return _replay(spec)
    return None


def check_study(spec: RunSpec, address: str, timeout: float = 2.0) -> EvictionWatch:
    """Raises :class:`~cachelab.capacity.WontFit` unless every step of ``spec`` fits the
    memcached at ``address``; returns a watch on its evictions from now."""
    memory = ServerMemory.read(address, timeout)
    refused: list[tuple[str, str]] = []
    for name in spec.steps:
        writes = step_writes(spec, name)
        if writes is None:
            continue
        try:
            memory.check(replace(writes, verb=f"run's {name} step", shrink="", sizes_flag=""))
        except WontFit as e:
            refused.append((name, str(e).rstrip(": ")))
    if refused:
        names = [n for n, _ in refused]
        rest = [s for s in spec.steps if s not in names]
        leave = (f"leave {' and '.join(names)} out (--steps {','.join(rest)}), or "
                 if rest else "")
        raise WontFit(f"{refused[0][1]}: {leave}leave out --server to run the study on a "
                      "private memcached sized for it")
    return EvictionWatch(address, memory.evictions, timeout=timeout)
