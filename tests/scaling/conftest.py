"""One real Ray cluster (a head and a worker node on 127.0.0.1) shared by the scaling tests."""
from __future__ import annotations

import os

import pytest

from tests.scaling.ray_local import LocalCluster


@pytest.fixture(scope="package")
def ray_cluster():
    """Started once for the package (a start costs ~15 s on 2 cores); stopped by process id."""
    old = {k: os.environ.get(k) for k in ("RAY_USAGE_STATS_ENABLED", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    os.environ.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
    cluster = LocalCluster(nodes=2, cpus=1).start()
    try:
        yield cluster
    finally:
        try:
            import ray
            if ray.is_initialized():
                ray.shutdown()
        finally:
            cluster.stop()
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
