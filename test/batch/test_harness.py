"""The headless harness and the mbsim_world fixture: inputs take the ROS node's path (bit for bit
the same run as a Session fed the same message bytes), PD commands reach their analytic
equilibrium, bad inputs are reported once, the built-in metrics on known signals, the fixture as
an installed pytest plugin, schedules. (A test's scenario function run unchanged as a batch:
test_batch.py, beside the cluster.)"""
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from batch_world import CART, FLOOR, HERE, PD_ARM, cart_spec
from mbsim_ros.batch.pytest_plugin import mbsim_world  # noqa: F401 (the fixture, also where the plugin is not installed)
from mbsim_ros.batch.signals import Signals

G = 9.80665
WORLD = f"{CART},{FLOOR}"


def test_a_position_command_settles_where_the_pd_torque_balances_gravity(mbsim_world):
    # hold 0: only the PD of joint_commands acts on the arm (kp 20); the arm (0.2 kg, centre of
    # mass 0.1 m up its length) tilted by q feels gravity m g l sin q
    world = mbsim_world(WORLD, config={"hold": 0.0, "pd_gains": {"ARM": PD_ARM}})
    world.joint_commands(["ARM"], position=[0.3])
    world.run(1.5)
    q = world.position("ARM")
    kp, m, l = PD_ARM[0], 0.2, 0.1
    equilibrium = q - (0.3 + m * G * l * math.sin(q) / kp)     # kp (0.3 - q) + m g l sin q = 0
    # 1e-4 rad: the base, free on the floor, rocks slightly under the arm's reaction (the
    # balance above treats it as fixed); the gravity term itself is 2.9e-3 rad
    assert abs(equilibrium) < 1e-4
    assert q - 0.3 > 2.5e-3                                     # the gravity term is there
    assert world.errors == []
    sig = world.signals()
    assert sig.joint("ARM")[0] == 0.0 and sig.joint("ARM")[-1] == q
    assert len(sig.t) == 1501 and sig.t[-1] == pytest.approx(1.5)


def test_inputs_take_the_ros_nodes_path_bit_for_bit(mbsim_world):
    """JointState bytes delivered to a Session's ROS bridge (as a live transport's reader thread
    does) and the harness's Session calls give the same trajectory, bit for bit."""
    from capture_transport import Capture, ros_session
    from mbsim_ros.ros import messages as msg
    from mbsim_ros.run.config import load_config
    from mbsim_ros.run import build_simulation
    from mbsim_ros.run.world import load_world
    config = load_config(None, {"model": WORLD, "real_time_factor": 0.0, "hold": 0.0, "pd_gains": {"ARM": PD_ARM}})
    models, _ = load_world(config)
    capture = Capture()
    session, _ = ros_session(build_simulation(models, config), capture, config)
    capture.deliver("/Cart/joint_commands", msg.joint_state(0.0, ["ARM"], position=[0.4], velocity=[0.1]))
    session.run(0.3)
    efforts = msg.float64_array([0, 0, 0, 0, 0, 0, 0.05])
    session.runner.submit(lambda: capture.deliver("/Cart/joint_efforts", efforts))
    session.run(0.2)
    q_node = session.sim.q.copy()
    session.close()

    world = mbsim_world(WORLD, config={"hold": 0.0, "pd_gains": {"ARM": PD_ARM}})
    world.joint_commands(["ARM"], position=[0.4], velocity=[0.1])
    world.run(0.3)
    world.joint_efforts([0, 0, 0, 0, 0, 0, 0.05])
    world.run(0.2)
    assert np.array_equal(world.sim.q, q_node)
    assert world.sim.q[7] > 0.3                                 # the command moved the arm


def test_a_bad_input_is_reported_once_and_ignored_as_on_the_node(mbsim_world):
    world = mbsim_world(WORLD)
    world.joint_commands(["ELBOW"], position=[1.0])
    world.joint_efforts([1.0, 2.0])
    world.run(0.01)
    assert world.errors == ["joint_commands: unknown joint(s) ELBOW",
                            "joint_efforts: expected 7 values (every DOF in model order), got 2"]
    assert abs(world.position("ARM")) < 1e-9


def synthetic(z, quaternions, v=None, dt=0.1):
    n = len(z)
    q = np.zeros((n, 8))
    q[:, 2] = z
    q[:, 3:7] = quaternions
    v = np.zeros((n, 7)) if v is None else v
    return Signals(np.arange(n) * dt, q, v, np.zeros((n, 7)), np.zeros(n), {}, dt, {"ARM": (7, 6)}, 0, "BODY",
                   np.zeros(7), np.zeros(7), np.full(7, np.nan), np.array([7]))


def test_builtin_metrics_on_known_signals():
    tilt = 0.3                                                  # about x: quaternion (sin 0.15, 0, 0, cos 0.15)
    quat = np.array([[0, 0, 0, 1], [math.sin(tilt / 2), 0, 0, math.cos(tilt / 2)], [0, 0, math.sin(0.5), math.cos(0.5)]])
    sig = synthetic([1.0, 0.6, 0.4], quat)
    assert sig.metric("max_tilt") == pytest.approx(tilt, abs=1e-15)
    assert sig.metric("final_tilt") == pytest.approx(0.0, abs=1e-15)    # a pure yaw is upright
    assert sig.metric("fell") == 1.0                            # 0.4 < half the initial 1.0
    assert sig.metric("fell", threshold=0.3) == 0.0
    tiny = synthetic([1, 1], [[0, 0, 0, 1], [math.sin(5e-9), 0, 0, math.cos(5e-9)]])
    assert tiny.metric("max_tilt") == pytest.approx(1e-8, rel=1e-7)    # small tilts stay exact
    v = np.zeros((5, 7))
    v[:3, 6] = [1.0, 0.5, 0.02]
    assert synthetic(np.ones(5), np.tile([0, 0, 0, 1.0], (5, 1)), v).metric("settle_time", threshold=0.01) == pytest.approx(0.3)
    v[-1, 0] = 1.0
    assert synthetic(np.ones(5), np.tile([0, 0, 0, 1.0], (5, 1)), v).metric("settle_time") == math.inf
    moved = synthetic(np.ones(3), np.tile([0, 0, 0, 1.0], (3, 1)))
    moved.q[-1, :2] = [3.0, 4.0]
    assert moved.metric("distance") == 5.0
    gyro = np.array([[1.0, 0, 0], [-1.0, 0, 0], [1.0, 0, 0], [-1.0, 0, 0]])
    moved.readings["IMU_GYRO"] = (np.arange(4) * 0.001, gyro + [0, 0, 5.0])   # a constant offset is no vibration
    assert moved.metric("imu_rms") == 1.0


def test_the_fixture_works_as_an_installed_pytest_plugin(tmp_path, pytestconfig):
    """pytest -p mbsim_ros.batch.pytest_plugin (what the pytest11 entry point registers) on a
    file that uses mbsim_world and nothing else of ours."""
    test = tmp_path / "test_uses_fixture.py"
    test.write_text(textwrap.dedent(f"""
        def test_arm_swings(mbsim_world):
            world = mbsim_world({WORLD!r}, config={{"hold": 0.0, "pd_gains": {{"ARM": {PD_ARM!r}}}}})
            world.joint_commands(["ARM"], position=[0.2])
            world.run(0.5)
            assert abs(world.position("ARM") - 0.2) < 0.01
            assert world.signals().metric("fell") == 0.0
        """))
    # installed (pip install: its pytest11 entry point), pytest loads it by itself, as it did in
    # this session, and naming it again is an error
    installed = pytestconfig.pluginmanager.has_plugin("mbsim_ros")
    load = [] if installed else ["-p", "mbsim_ros.batch.pytest_plugin"]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", *load, "-p", "no:cacheprovider", str(test)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    setup = (HERE.parents[1] / "setup.py").read_text()
    assert '"pytest11": ["mbsim_ros = mbsim_ros.batch.pytest_plugin"]' in setup


def test_a_schedule_sends_its_inputs_at_their_times(mbsim_world, tmp_path):
    """A spec's schedule (run in this process: workers=0) against the same commands sent by hand."""
    pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
    from mbsim_ros.batch.runner import run_batch
    from mbsim_ros.batch.spec import load_spec, prepare
    schedule = [{"t": 0.05, "joint_commands": {"name": ["ARM"], "position": [0.3]}},
                {"t": 0.12, "joint_efforts": [0, 0, 0, 0, 0, 0, 0.02]}]
    spec = prepare(load_spec(cart_spec(seeds=[0], parameters={}, schedules={"lift": schedule}, schedule="lift")))
    (row,) = run_batch(spec, str(tmp_path / "out"), workers=0).to_pylist()
    world = mbsim_world(WORLD, config={"sensors": {"IMU_GYRO": {"noise": {"stddev": 0.01}}}, "pd_gains": {"ARM": PD_ARM}})
    world.run(0.05)
    world.joint_commands(["ARM"], position=[0.3])
    world.run_until(0.12)
    world.joint_efforts([0, 0, 0, 0, 0, 0, 0.02])
    world.run_until(0.2)
    assert row["arm"] == world.position("ARM") and row["arm"] > 1e-4


def test_a_run_configuration_file_is_read_relative_to_the_spec_and_world_keys_override_it(tmp_path):
    import yaml
    from mbsim_ros.batch.spec import SpecError, load_spec
    (tmp_path / "run.yaml").write_text("hold: 0.0\nseed: 5\npd_gains: {ARM: [1.0, 0.1]}\n")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({"config": "run.yaml", "world": {"seed": 7}, "duration": 0.1}))
    spec = load_spec(str(tmp_path / "spec.yaml"))
    assert spec.config.hold == 0.0 and spec.config.pd_gains["ARM"] == [1.0, 0.1]
    assert spec.config.seed == 7 and spec.seeds == [7] and spec.config.real_time_factor == 0.0
    (tmp_path / "hil.yaml").write_text("devices: {WaistGyro: {port: 'loop://', protocol: csv}}\n")
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"config": "hil.yaml", "duration": 0.1}))
    with pytest.raises(SpecError, match=r"bad.yaml: config .*hil.yaml: devices: real devices"):
        load_spec(str(tmp_path / "bad.yaml"))
