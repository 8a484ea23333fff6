"""One Ray cluster of several raylet nodes on this machine, shared by every Ray test.

Each node listens on its own loopback address (the head on 127.0.0.2, the others on
127.0.0.3, 127.0.0.4, …): Ray otherwise replaces 127.0.0.1 with the machine's interface
address, and all traffic is to stay on loopback. The memcached the tests load listens on
127.0.0.5. The cluster starts in about 5-8 s and is stopped when the last test here is done; the
whole directory is skipped when Ray is not installed (``pip install 'cachelab[ray]'``). When Ray
Client is installed (Ray's [client] extra, which cachelab's [ray] extra asks for) the head also
runs a Ray Client server, as ``ray start --head`` does (``RayCluster.client_address``).
"""

from __future__ import annotations

import gc
import importlib.util
import os
import socket
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("ray") is None:  # (imported where the cluster starts, not here)
    pytest.skip("Ray is not installed (pip install 'cachelab[ray]')", allow_module_level=True)

import cachelab  # noqa: E402
from cachelab.raycluster import RayOptions  # noqa: E402
from cachelab.servers import PrivateMemcached  # noqa: E402
from rayaddrs import HEAD_IP, SERVER_IP  # noqa: E402

#: Raylet nodes in the test cluster, head included.
NODES = 2


@dataclass
class RayCluster:
    """The running test cluster: its address, its nodes' addresses, and options to reach it."""

    address: str
    node_ips: list[str]
    #: ``ray://HEAD:PORT``, the head's Ray Client server; None without Ray Client installed.
    client_address: str | None = None

    def options(self, agents: int = 2, **kw: Any) -> RayOptions:
        return RayOptions(address=self.address, agents=agents, node_ip=HEAD_IP,
                          ready_timeout=30.0, **kw)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """``NODES`` raylets on this machine, the driver (this process) connected to the head."""
    import ray
    from ray.cluster_utils import Cluster

    # The workers import cachelab from wherever this process does (installed or the tree).
    package_root = str(Path(cachelab.__file__).resolve().parents[1])
    paths = [package_root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    # Ray's workers listen on ports from 10002 up by default, memcached's 11211 among them: the
    # twemproxy tests on port 11211 (same addresses, same xdist worker) found it taken.
    node_args = {"num_cpus": 2, "object_store_memory": 80 * 2**20,
                 "min_worker_port": 20000, "max_worker_port": 29999}
    client_port = _free_port(HEAD_IP) if importlib.util.find_spec("grpc") else None
    # The client server forks a server per client from gRPC's threads; with grpcio's fork
    # handlers on (its default) the child crashed now and then before it exec'ed (a segfault
    # in cygrpc; the client got "Initialization failure from server" 30 s later).
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
    with warnings.catch_warnings():
        # Ray leaves its client server's log files open in this process (ResourceWarning).
        warnings.simplefilter("ignore", ResourceWarning)
        cluster = Cluster(initialize_head=True,
                          head_node_args={"node_ip_address": HEAD_IP, "include_dashboard": False,
                                          "ray_client_server_port": client_port, **node_args})
        gc.collect()
    try:
        ips = [HEAD_IP]
        for n in range(1, NODES):
            ip = f"127.0.0.{2 + n}"
            cluster.add_node(node_ip_address=ip, **node_args)
            ips.append(ip)
        cluster.wait_for_nodes(timeout=60)
        ray.init(address=cluster.address, _node_ip_address=HEAD_IP, log_to_driver=False,
                 configure_logging=False)
        _stop.append(lambda: (ray.shutdown(), cluster.shutdown()))
        yield RayCluster(address=cluster.address, node_ips=ips,
                         client_address=client_port and f"ray://{HEAD_IP}:{client_port}")
    finally:
        _stop_cluster()


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


#: How to stop the cluster once the last Ray test is done (set while it runs).
_stop: list[Any] = []


def _stop_cluster() -> None:
    while _stop:
        _stop.pop()()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stops the cluster as soon as the session leaves this directory, rather than at the end
    of the session: its raylets and daemons would otherwise take CPU from every test after
    them (timing-sensitive ones failed)."""
    here = Path(__file__).parent
    if nextitem is None or here not in Path(nextitem.path).parents:
        _stop_cluster()


@pytest.fixture(scope="session")
def ray_memcached() -> Iterator[PrivateMemcached]:
    """A private memcached on 127.0.0.5, shared by the Ray tests: do not stop or flush it."""
    with PrivateMemcached(host=SERVER_IP) as server:
        yield server
