"""The batch tests' world and fixtures: the cart world's spec, warm kernels, one LocalCluster of
two workers on the loopback interface. A module, not a conftest.py: a second conftest.py would
take the name `conftest` from test/conftest.py, which other tests import from."""
import os
import pathlib
import sys

import pytest

from mbsim_ros.batch import pytest_plugin

HERE = pathlib.Path(__file__).resolve().parent
CART = HERE / "models" / "cart.wrl"
FLOOR = pathlib.Path(pytest_plugin.__file__).resolve().parents[1] / "data" / "models" / "floor.wrl"


# joint_commands' PD on the small arm (0.0027 kg m^2 about its hinge): the default kd 10 is an
# explicit damper with kd dt / I = 3.7 > 2, unstable at dt = 1 ms; these are about critical
PD_ARM = [20.0, 0.5]


def cart_spec(**changes):
    """A small batch over the cart on the floor: 0.2 s scenarios, two seeds, gyro noise."""
    spec = {
        "world": {"model": f"{CART},{FLOOR}", "sensors": {"IMU_GYRO": {"noise": {"stddev": 0.01}}},
                  "pd_gains": {"ARM": PD_ARM}},
        "duration": 0.2,
        "seeds": [0, 1],
        "parameters": {"link.ARM.mass": {"values": [0.1, 0.3]},
                       "joint.ARM.damping": {"range": [0.1, 1.0], "steps": 2}},
        "metrics": {"max_tilt": {}, "max_contact_force": {}, "imu_rms": {}, "distance": {},
                    "base_z": {"function": "batch_helpers:base_z"},
                    "gyro_x": {"function": "batch_helpers:gyro_last_x"},
                    "arm": {"function": "batch_helpers:arm_final", "tolerance": 1e-6}},
    }
    spec.update(changes)
    return spec


@pytest.fixture(scope="session")
def warm():
    """Compile (or load) every kernel a scenario uses in this process first, so that the workers
    find them in the numba cache instead of compiling each on its own."""
    from mbsim_ros.batch.pytest_plugin import make_world
    with make_world(f"{CART},{FLOOR}") as world:
        world.run(0.005)


@pytest.fixture(scope="session")
def cluster(warm):
    """(client, cluster): two single-threaded worker processes on 127.0.0.1."""
    distributed = pytest.importorskip("dask.distributed", reason="dask[distributed] is a test dependency")
    pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
    import logging
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    client = distributed.Client(cluster)
    yield client, cluster
    client.close()
    cluster.close()
