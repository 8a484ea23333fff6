"""``simulate --ray`` on the multi-node test cluster: the same results as the local run, for
request traces (one task per strategy) and flat traces (one task per policy and capacity,
the trace from the object store or a shared path)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

import cachelab.traces as traces
from cachelab.simulate import (
    FlatSimulateSpec,
    SimulateSpec,
    simulate,
    simulate_flat_trace,
)
from cachelab.simulate.fanout import simulate_flat_trace_on_ray, simulate_on_ray
from clitools import cachelab


def _comparable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in ("created", "elapsed_s")}


def test_request_sweep_on_ray_equals_the_local_run(ray_cluster) -> None:
    trace = traces.synthesize(traces.SynthParams(requests=3000))
    spec = SimulateSpec(draws=3, seed=5)
    here = simulate(trace, spec, trace_info={"source": "synthetic"})
    done: list[tuple[int, int]] = []
    there = simulate_on_ray(trace, spec, ray_cluster.options(),
                            trace_info={"source": "synthetic"},
                            on_task=lambda d, t: done.append((d, t)))
    assert len(here.strategies) == 5
    assert _comparable(there.to_dict()) == _comparable(here.to_dict())
    assert done[-1] == (5, 5)


@pytest.fixture
def flat_csv(tmp_path: Path) -> Path:
    rng = random.Random(3)
    lines = ["time,key,size"]
    for t in range(20_000):
        k = int(rng.paretovariate(1.2)) % 3000
        lines.append(f"{t},{k},{100 + k % 50}")
    path = tmp_path / "keys.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("shared", [False, True])
def test_flat_sweep_on_ray_equals_the_local_run(ray_cluster, flat_csv: Path,
                                                shared: bool) -> None:
    spec = FlatSimulateSpec(policies=("lru", "fifo", "s3fifo"), sizes=(0.05, 0.2, 100))
    here = simulate_flat_trace(flat_csv, spec)
    there = simulate_flat_trace_on_ray(flat_csv, spec, ray_cluster.options(), shared=shared)
    assert len(here.simulation.results) == 9
    assert _comparable(there.to_dict()) == _comparable(here.to_dict())


def test_simulate_cli_with_ray_equals_without(ray_cluster, flat_csv: Path,
                                              tmp_path: Path) -> None:
    done = cachelab("simulate", flat_csv, "--policies", "lru,sieve", "--sizes", "10%,40%",
                    "--ray", ray_cluster.address, "--ray-node-ip", "127.0.0.2",
                    "--out", tmp_path, "--no-plots", "--format", "json")
    assert done.returncode == 0, done.stderr
    here = simulate_flat_trace(flat_csv, FlatSimulateSpec(policies=("lru", "sieve"),
                                                          sizes=(0.1, 0.4)))
    there = json.loads((tmp_path / "simulate.json").read_text())
    assert _comparable(there) == _comparable(json.loads(json.dumps(here.to_dict())))
