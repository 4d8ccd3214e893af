"""Accelerometer, gyro and force sensor: OpenHRP semantics checked against analytic cases,
MuJoCo's sensors on the same random motion, and the standing SR1's weight."""
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import mbsim_ros as mb
from mbsim_ros.cli import DEFAULT_WORLD, hold_initial_pose
from mbsim_ros.model import Joint, Link, Model, Sensor

G = 9.80665


def pose(R=np.eye(3), p=(0, 0, 0)):
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, p
    return T


def one_body(joint_type, q0=None, v0=None, gravity=(0, 0, -G), sensor_pose=np.eye(4), com=(0, 0, 0)):
    m = Model("m", gravity=gravity)
    m.add_link(Link("l", 2.0, com, np.diag([0.1, 0.2, 0.3])))
    m.add_joint(Joint("j", joint_type, None, "l", q0=q0, v0=v0))
    m.sensors += [Sensor("acc", "accelerometer", "l", sensor_pose), Sensor("gyro", "gyro", "l", sensor_pose)]
    return m.finalize()


def test_a_resting_accelerometer_reads_plus_g_along_world_up_in_its_own_frame():
    R = Rotation.from_euler("xyz", [0.3, -0.7, 1.1]).as_matrix()
    # a pendulum hanging straight down is at rest; the sensor is tilted on its link
    sim = mb.Simulation(one_body("revolute", sensor_pose=pose(R, (0.1, 0.2, -0.5)), com=(0, 0, -0.5)))
    sim.step(10)
    r = sim.readings()
    # exact: nothing moves, so the reading is R^T (0, 0, g) to rounding
    np.testing.assert_allclose(r["acc"].values, R.T @ [0, 0, G], atol=1e-12)
    np.testing.assert_allclose(r["gyro"].values, 0, atol=1e-12)
    assert r["acc"].frame == "acc" and r["acc"].stamp == pytest.approx(0.009)


def test_a_spinning_body_in_free_fall_reads_zero_at_its_center_of_mass():
    sim = mb.Simulation(one_body("free", q0=[0, 0, 5, 0, 0, 0, 1], v0=[1, 0, 2, 0.5, -3, 2]))
    sim.step(50)
    r = sim.readings()
    # torque-free rotation about the COM: only floating-point error remains
    np.testing.assert_allclose(r["acc"].values, 0, atol=1e-9)
    w = sim.v[3:]                    # body-frame angular velocity at the start of the last step
    assert np.linalg.norm(r["gyro"].values) == pytest.approx(np.linalg.norm(w), rel=1e-3)


def test_a_spinning_arm_in_zero_gravity_reads_omega_squared_r_toward_the_axis():
    w, r = 3.0, 0.4
    R = Rotation.from_euler("z", 0.6).as_matrix()
    sim = mb.Simulation(one_body("revolute", v0=[w], gravity=(0, 0, 0), sensor_pose=pose(R, (r, 0, 0))))
    sim.step(7)
    reading = sim.readings()["acc"].values
    # constant spin: a = -w^2 r x_link, seen in the sensor frame; the gyro reads w about z
    np.testing.assert_allclose(reading, R.T @ [-w * w * r, 0, 0], atol=1e-12)
    np.testing.assert_allclose(sim.readings()["gyro"].values, R.T @ [0, 0, w], atol=1e-12)


# ---------------------------------------------------------------- MuJoCo, same motion ---
def vec(x):
    return " ".join(f"{float(a):.17g}" for a in x)


def random_tree(rng, parents=(-1, 0, 1, 1, 3, 0)):
    """The same random tree of hinge and slide joints as a Model and as MJCF, with one site
    per body carrying an accelerometer, gyro, force and torque sensor."""
    m = Model("tree")
    bodies = {}
    xml_bodies = {}
    for i, parent in enumerate(parents):
        kind = "revolute" if rng.uniform() < 0.7 else "prismatic"
        R = Rotation.random(random_state=rng.integers(1 << 30)).as_matrix()
        p = rng.uniform(-0.5, 0.5, 3)
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        mass = rng.uniform(0.5, 2.0)
        com = rng.uniform(-0.2, 0.2, 3)
        Ri = Rotation.random(random_state=rng.integers(1 << 30)).as_matrix()
        inertia = Ri @ np.diag(rng.uniform(0.05, 0.1, 3)) @ Ri.T
        Rs = Rotation.random(random_state=rng.integers(1 << 30)).as_matrix()
        ps = rng.uniform(-0.3, 0.3, 3)
        name = f"b{i}"
        m.add_link(Link(name, mass, com, inertia))
        m.add_joint(Joint(f"j{i}", kind, None if parent < 0 else f"b{parent}", name, origin=pose(R, p), axis=axis))
        for t in ("accelerometer", "gyro", "force"):
            m.sensors.append(Sensor(f"{t}{i}", t, name, pose(Rs, ps)))
        quat = Rotation.from_matrix(R).as_quat()[[3, 0, 1, 2]]
        squat = Rotation.from_matrix(Rs).as_quat()[[3, 0, 1, 2]]
        I = inertia
        xml_bodies[i] = (parent, (
            f'<body name="{name}" pos="{vec(p)}" quat="{vec(quat)}">'
            f'<joint name="j{i}" type="{"hinge" if kind == "revolute" else "slide"}" axis="{vec(axis)}"/>'
            f'<inertial pos="{vec(com)}" mass="{mass:.17g}" '
            f'fullinertia="{vec([I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]])}"/>'
            f'<site name="s{i}" pos="{vec(ps)}" quat="{vec(squat)}"/>'))
    m.finalize()

    def emit(i):
        children = "".join(emit(k) for k, (par, _) in xml_bodies.items() if par == i)
        return xml_bodies[i][1] + children + "</body>"
    sensors = "".join(f'<accelerometer site="s{i}"/><gyro site="s{i}"/><force site="s{i}"/><torque site="s{i}"/>'
                      for i in range(len(parents)))
    xml = (f'<mujoco><option gravity="0 0 {-G:.17g}"/><worldbody>'
           + "".join(emit(k) for k, (par, _) in xml_bodies.items() if par < 0)
           + f"</worldbody><sensor>{sensors}</sensor></mujoco>")
    return m, xml


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_accelerometer_gyro_and_force_sensors_equal_mujocos_on_a_random_motion(seed):
    mujoco = pytest.importorskip("mujoco")
    rng = np.random.default_rng(seed)
    model, xml = random_tree(rng)
    mm = mujoco.MjModel.from_xml_string(xml)
    md = mujoco.MjData(mm)
    md.qpos[:] = rng.uniform(-1, 1, mm.nq)
    md.qvel[:] = rng.uniform(-2, 2, mm.nv)
    md.qfrc_applied[:] = rng.uniform(-5, 5, mm.nv)
    mujoco.mj_forward(mm, md)
    sim = mb.Simulation(model)
    ours = sim.sense(md.qpos.copy(), md.qvel.copy(), md.qacc.copy())
    theirs = md.sensordata.reshape(-1, 12)
    for i in range(len(theirs)):
        # same instant, same formulas up to rounding; 1e-6 (m/s^2, rad/s, N, N m) leaves room
        # for MuJoCo's different order of operations on values of order 1-100
        np.testing.assert_allclose(ours[f"accelerometer{i}"], theirs[i, 0:3], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(ours[f"gyro{i}"], theirs[i, 3:6], rtol=1e-6, atol=1e-6)
        # MuJoCo's force/torque sensors report the parent's wrench on the child; OpenHRP's
        # (and SDF's child_to_parent) the child's on the parent: the same numbers negated
        np.testing.assert_allclose(ours[f"force{i}"][:3], -theirs[i, 6:9], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(ours[f"force{i}"][3:], -theirs[i, 9:12], rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------ force sensor ---
def test_a_held_arm_reads_its_subtrees_weight_and_moment():
    """Two links on horizontal-axis hinges, held still by their gravity torques: the sensor at
    the second joint reads the weight of link 2 + link 3 and the moment of that weight."""
    m = Model("arm")
    masses, coms = [1.0, 1.5, 0.7], [(0.2, 0, 0), (0.3, 0, 0.05), (0.1, 0.02, 0)]
    for k in range(3):
        m.add_link(Link(f"l{k}", masses[k], coms[k], np.diag([0.01, 0.02, 0.03])))
    R = Rotation.from_euler("xyz", [0.2, 0.1, -0.4]).as_matrix()
    m.add_joint(Joint("j0", "revolute", None, "l0", axis=(0, 1, 0), q0=[0.3]))
    m.add_joint(Joint("j1", "revolute", "l0", "l1", origin=pose(p=(0.4, 0, 0)), axis=(0, 1, 0), q0=[-0.5]))
    m.add_joint(Joint("j2", "revolute", "l1", "l2", origin=pose(p=(0.5, 0, 0)), axis=(0, 0, 1), q0=[0.7]))
    m.sensors.append(Sensor("ft", "force", "l1", pose(R, (0.05, 0.01, 0.02))))
    m.finalize()
    sim = mb.Simulation(m)
    sim.tau = mb.inverse_dynamics(m, sim.q, np.zeros(3), np.zeros(3))   # holds the pose exactly
    sim.step(20)
    assert np.abs(sim.v).max() < 1e-12
    T = sim.link_transforms()
    Ts = T["l1"] @ m.sensors[0].pose
    weight = np.zeros(3)
    moment = np.zeros(3)
    for k in (1, 2):
        F = np.array([0, 0, -G * masses[k]])
        c = T[f"l{k}"][:3, :3] @ coms[k] + T[f"l{k}"][:3, 3]
        weight += F
        moment += np.cross(c - Ts[:3, 3], F)
    reading = sim.readings()["ft"].values
    np.testing.assert_allclose(reading[:3], Ts[:3, :3].T @ weight, atol=1e-9)
    np.testing.assert_allclose(reading[3:], Ts[:3, :3].T @ moment, atol=1e-9)


def test_the_standing_sr1s_ankle_sensors_carry_the_weight_above_them():
    models = [mb.load_model(p) for p in DEFAULT_WORLD]
    hold_initial_pose(models, 2000)
    robot = models[0]
    sim = mb.Simulation(models)
    sim.step(1500)                         # settle on the floor
    total = np.zeros(3)
    n = 200
    for _ in range(n):                     # average out the residual sway
        sim.step(1)
        r = sim.readings()
        T = sim.link_transforms()
        for name in ("LeftAnkleForceSensor", "RightAnkleForceSensor"):
            s = next(s for s in robot.sensors if s.name == name)
            Rs = (T[s.link] @ s.pose)[:3, :3]
            total += Rs @ r[name].values[:3] / n
    feet = sum(robot.link(s.link).mass for s in robot.sensors if s.type == "force")
    above = (robot.total_mass - feet) * G
    # the tolerance: 1 % (the rest is the robot's sway, averaged over 0.2 s)
    assert total[2] == pytest.approx(above, rel=0.01)
    assert abs(total[0]) < 0.01 * above and abs(total[1]) < 0.01 * above


def test_force_sensors_on_welded_links_are_refused():
    m = Model("w")
    m.add_link(Link("a", 1.0, [0, 0, 0], np.eye(3) * 0.1))
    m.add_link(Link("b", 1.0, [0, 0, 0], np.eye(3) * 0.1))
    m.add_joint(Joint("ja", "revolute", None, "a"))
    m.add_joint(Joint("jb", "fixed", "a", "b"))
    m.sensors.append(Sensor("ft", "force", "b"))
    m.finalize()
    with pytest.raises(mb.SensorConfigError, match="'ft'.*welded"):
        mb.Simulation(m)
