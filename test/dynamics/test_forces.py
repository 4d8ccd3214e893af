"""Force elements, actuators and body loads in the Simulation (dynamics/forces.py).

Ground truth: the analytic damped oscillator (linear spring-damper and rotary spring-damper),
the elements' own force tables and maps (scipy's linear grid interpolation with extrapolation
for the maps), OpenSim's own Python package for BushingForce, CoordinateLimitForce,
PointToPointSpring and the Point/Torque/Coordinate actuators (udot after realizeAcceleration on
the same tiny models), the analytic response to a sinusoidal load, and a force sensor's reading.
"""
import numpy as np
import pytest
from scipy.interpolate import RegularGridInterpolator

import mbsim_ros as mb
from mbsim_ros.model import (Actuator, BodyLoad, Bushing, CoordinateLimitForce, Function, Joint, Link, Model,
                             ModelError, RotarySpringDamper, Sensor, SpringDamper)


def pose(R=np.eye(3), p=(0.0, 0.0, 0.0)):
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, p
    return T


def slider(mass=4.0, q0=0.0, v0=0.0, gravity=(0.0, 0.0, 0.0), **spring):
    """A body on a prismatic joint along x with a spring from the world point (-1, 0, 0) to its
    origin: free length 1 makes the spring's deformation the joint coordinate."""
    m = Model("slider", gravity=gravity)
    m.add_link(Link("body", mass, [0, 0, 0], np.eye(3) * 0.1))
    m.add_joint(Joint("x", "prismatic", None, "body", axis=[1, 0, 0], q0=[q0], v0=[v0]))
    m.forces.append(SpringDamper("spring", None, np.array([-1.0, 0, 0]), "body", np.zeros(3),
                                 **dict(dict(free_length=1.0), **spring)))
    return m.finalize()


def run(sim, seconds):
    n = int(round(seconds / sim.dt))
    q, v = np.zeros((n + 1, sim.nq)), np.zeros((n + 1, sim.nv))
    q[0], v[0] = sim.q, sim.v
    for k in range(n):
        sim.step()
        q[k + 1], v[k + 1] = sim.q, sim.v
    return np.arange(n + 1) * sim.dt, q, v


def damped_oscillator(t, x0, omega0, decay):
    """x(t) of x'' + 2 decay x' + omega0^2 x = 0, x(0) = x0, x'(0) = 0."""
    wd = np.sqrt(omega0 ** 2 - decay ** 2)
    return np.exp(-decay * t) * x0 * (np.cos(wd * t) + decay / wd * np.sin(wd * t))


def period_and_decay(t, x):
    """Period from the zero crossings (linear interpolation) and decay rate from successive peaks."""
    s = np.nonzero(np.sign(x[:-1]) != np.sign(x[1:]))[0]
    zeros = t[s] - x[s] * (t[s + 1] - t[s]) / (x[s + 1] - x[s])
    period = 2 * np.mean(np.diff(zeros))
    peaks = [k for k in range(1, len(x) - 1) if x[k] > x[k - 1] and x[k] >= x[k + 1]]
    decay = np.mean(np.log(x[peaks[:-1]] / x[peaks[1:]]) / np.diff(t[peaks]))
    return period, decay


# --- SpringDamper -------------------------------------------------------------------------------

K, M, C = 400.0, 4.0, 4.0       # omega0 = 10 rad/s, decay c / 2m = 0.5 1/s


def test_spring_damper_with_rk4_follows_the_analytic_damped_oscillator():
    sim = mb.Simulation(slider(M, q0=0.1, stiffness=K, damping=C), dt=1e-3, integrator="rk4", contact="none")
    t, q, _ = run(sim, 3.0)
    # RK4's global error at omega dt = 0.01 is ~1e-10 of the amplitude; 1e-8 m leaves room
    np.testing.assert_allclose(q[:, 0], damped_oscillator(t, 0.1, np.sqrt(K / M), C / (2 * M)), atol=1e-8)


def test_spring_damper_with_semi_implicit_euler_has_the_analytic_frequency_and_decay():
    sim = mb.Simulation(slider(M, q0=0.1, stiffness=K, damping=C), dt=1e-3)
    t, q, _ = run(sim, 3.0)
    period, decay = period_and_decay(t, q[:, 0])
    wd = np.sqrt(K / M - (C / (2 * M)) ** 2)
    # symplectic Euler with explicit damping: the discrete frequency is wd (1 + c dt / 4m) to
    # first order (2.5e-4 here) and the decay c/2m (1 + c dt / 2m) (5e-4); peaks sampled at dt: 1e-3
    assert period == pytest.approx(2 * np.pi / wd, rel=5e-4)
    assert decay == pytest.approx(C / (2 * M), rel=2e-3)


def test_spring_pulls_the_same_under_gravity_along_its_line_and_starts_from_its_preload():
    # vertical slider: equilibrium where k x = preload - m g  (x = deformation, up positive)
    m = Model("v", gravity=(0, 0, -9.81))
    m.add_link(Link("body", 2.0, [0, 0, 0], np.eye(3)))
    m.add_joint(Joint("z", "prismatic", None, "body", axis=[0, 0, 1]))
    m.forces.append(SpringDamper("s", None, np.array([0, 0, -1.0]), "body", np.zeros(3), free_length=1.0,
                                 stiffness=200.0, damping=40.0, preload=5.0))
    sim = mb.Simulation(m.finalize(), dt=1e-3)
    sim.step(5000)
    # overdamped-ish, 5 s: the residual motion is far below 1e-9 m
    assert sim.q[0] == pytest.approx((5.0 - 2.0 * 9.81) / 200.0, abs=1e-9)


DEFS, FORCES = np.array([-0.2, 0.0, 0.1, 0.3]), np.array([-50.0, 0.0, 30.0, 45.0])
VELS, DAMP = np.array([-1.0, 0.0, 2.0]), np.array([-8.0, 0.0, 10.0])


@pytest.mark.parametrize("x,xd", [(-0.35, 0.0), (-0.2, -1.5), (0.05, 0.5), (0.1, 2.0), (0.25, 3.0), (0.5, -0.2)])
def test_curve_spring_reproduces_its_force_table_between_and_beyond_its_points(x, xd):
    preload = 3.0
    model = slider(2.0, q0=x, v0=xd, preload=preload, stiffness_curve=Function.piecewise_linear(DEFS, FORCES),
                   damping_curve=Function.piecewise_linear(VELS, DAMP))
    sim = mb.Simulation(model, dt=1e-3)
    expected = preload - np.interp(x, DEFS, FORCES) - np.interp(xd, VELS, DAMP)
    # np.interp clamps outside: extend the end segments linearly as the curves do
    for value, grid, table, sign in ((x, DEFS, FORCES, -1), (xd, VELS, DAMP, -1)):
        for end, nxt in ((0, 1), (-1, -2)):
            if (value - grid[end]) * (grid[nxt] - grid[end]) < 0:
                slope = (table[nxt] - table[end]) / (grid[nxt] - grid[end])
                expected += sign * slope * (value - grid[end])
    # the generalized force on the slider is the spring force; also its acceleration (F/m) in a step
    assert sim.applied_forces()[0] == pytest.approx(expected, abs=1e-12)
    sim.step()
    assert (sim.v[0] - xd) / sim.dt == pytest.approx(expected / 2.0, rel=1e-12, abs=1e-12)


def test_map_spring_interpolates_bilinearly_and_extrapolates_linearly():
    defs, vels = np.array([-0.1, 0.0, 0.2]), np.array([-1.0, 0.5, 2.0])
    rng = np.random.default_rng(3)
    table = rng.uniform(-100, 100, (3, 3))           # (velocity, deformation)
    reference = RegularGridInterpolator((vels, defs), table, method="linear", bounds_error=False, fill_value=None)
    model = slider(2.0, preload=1.5, map_deformations=defs, map_velocities=vels, map_forces=table,
                   stiffness=1e6, damping=1e6)      # the map beats the linear coefficients
    sim = mb.Simulation(model)
    for x, xd in [(0.05, 0.0), (-0.07, 1.9), (0.3, -2.0), (-0.4, 0.7), (0.13, 3.5)]:
        sim.q, sim.v = [x], [xd]
        # rounding only
        assert sim.applied_forces()[0] == pytest.approx(1.5 - reference([[xd, x]])[0], abs=1e-10)


def test_length_stops_hold_the_spring_between_min_and_max_length():
    model = slider(1.0, min_length=0.9, max_length=1.2)     # zero stiffness: only the stops act
    model.actuators.append(Actuator("push", "coordinate", gain=50.0, dof="x", control=1.0))
    sim = mb.Simulation(model.finalize(), dt=1e-3)
    _, q, _ = run(sim, 1.0)
    length = 1.0 + q[:, 0]
    # speculative rows land on the stop; the LCP's CFM (1e-5) lets it give by cfm v dt ~ 5e-8 m
    # at a 4.5 m/s impact and by ~1e-9 m under the steady push: 1e-7 m
    assert length.max() <= 1.2 + 1e-7
    assert length[-1] == pytest.approx(1.2, abs=1e-7)
    sim.set_control("push", -1.0)
    _, q, _ = run(sim, 1.0)
    length = 1.0 + q[:, 0]
    assert length.min() >= 0.9 - 1e-7 and length[-1] == pytest.approx(0.9, abs=1e-7)
    with pytest.raises(ValueError, match="spring length stops 'spring'"):
        mb.Simulation(model, integrator="rk4", contact="none")


# --- RotarySpringDamper ----------------------------------------------------------------------------

def rotor(inertia=0.5, q0=0.0, v0=0.0, **rsda):
    """A rotor (inertia about any axis given) with an RSDA from the world to it; the frames'
    x axes coincide at q = 0, so the RSDA angle is the joint angle."""
    m = Model("rotor", gravity=(0, 0, -9.81))
    m.add_link(Link("rotor", 1.0, [0, 0, 0], np.eye(3) * inertia))
    R = np.array([[0, 0, 1.0], [1.0, 0, 0], [0, 1.0, 0]])     # any frame pair with z along the axis works
    m.add_joint(Joint("q", "revolute", None, "rotor", axis=R[:, 2], q0=[q0], v0=[v0]))
    m.forces.append(RotarySpringDamper("rsda", None, pose(R, (0.0, 0.0, 0.0)), "rotor", pose(R, (0.0, 0.0, 0.3)),
                                       **rsda))
    return m.finalize()


def test_rotary_spring_damper_follows_the_analytic_damped_oscillator():
    sim = mb.Simulation(rotor(0.5, q0=0.4, stiffness=50.0, damping=1.0, free_angle=0.2), dt=1e-3,
                        integrator="rk4", contact="none")
    t, q, _ = run(sim, 3.0)
    # omega0 = 10, decay = c / 2I = 1; RK4 error ~1e-10 rad
    np.testing.assert_allclose(q[:, 0], 0.2 + damped_oscillator(t, 0.2, 10.0, 1.0), atol=1e-8)


def test_rotary_spring_counts_turns():
    # free angle three half-turns away: a spring that lost count would settle at -pi or pi
    sim = mb.Simulation(rotor(0.5, stiffness=20.0, damping=6.0, free_angle=3 * np.pi), dt=1e-3)
    sim.step(8000)
    # damping ratio 0.95, 8 s: settled far below 1e-6 rad
    assert sim.q[0] == pytest.approx(3 * np.pi, abs=1e-6)
    sim.reset()
    sim.q, sim.v = [2 * np.pi], [0.0]
    sim.step(1)     # the count starts from the first angle it sees: here 0 (mod 2 pi)
    sim.step(8000)
    assert sim.q[0] == pytest.approx(5 * np.pi, abs=1e-6)


def test_rotary_spring_curves_give_their_torque():
    stiff = Function.piecewise_linear([-1.0, 0.0, 1.0], [-5.0, 0.0, 20.0])
    damp = Function.polynomial([0.0, 0.5, 0.1])
    for angle, rate in [(0.5, 1.0), (-2.0, -3.0), (2.5, 0.2)]:
        sim = mb.Simulation(rotor(0.5, q0=angle, v0=rate, stiffness_curve=stiff, damping_curve=damp, preload=1.0,
                                  free_angle=0.1))
        # the generalized force of a torque about the joint axis is the torque
        assert sim.applied_forces()[0] == pytest.approx(1.0 - stiff(angle - 0.1) - damp(rate), abs=1e-12)


# --- body loads and time ---------------------------------------------------------------------------

@pytest.mark.parametrize("integrator,tol", [("rk4", 1e-10), ("semi-implicit-euler", 1e-5)])
def test_a_sinusoidal_body_load_moves_a_mass_as_the_analytic_solution(integrator, tol):
    A, w, m = 3.0, 4.0, 1.5
    model = Model("load", gravity=(0, 0, 0))
    model.add_link(Link("b", m, [0, 0, 0], np.eye(3)))
    model.add_joint(Joint("x", "prismatic", None, "b", axis=[1, 0, 0]))
    # local force at an off-centre point along the slide: only its x component moves the body
    model.loads.append(BodyLoad("push", "b", "force", np.array([A, 7.0, 0.0]), point=np.array([0, 0.2, 0]),
                                modulation=Function.sine(1.0, w / (2 * np.pi))))
    sim = mb.Simulation(model.finalize(), dt=1e-3, integrator=integrator, contact="none")
    t, q, _ = run(sim, 2.0)
    exact = A / (m * w * w) * (w * t - np.sin(w * t))
    # RK4 with the stage times right: ~1e-13 m; semi-implicit Euler, forces at the step's start
    # time: ~1.5e-6 m over the 0.9 m travel (a time one step off would be ~1e-3 m wrong)
    np.testing.assert_allclose(q[:, 0], exact, atol=tol)


def test_world_torque_load_and_local_force_at_a_point():
    model = Model("load", gravity=(0, 0, 0))
    model.add_link(Link("b", 2.0, [0, 0, 0], np.diag([0.1, 0.2, 0.3])))
    model.add_joint(Joint("j", "free", None, "b", q0=[0, 0, 0, 0, 0, np.sin(0.3), np.cos(0.3)]))
    model.loads.append(BodyLoad("t", "b", "torque", np.array([0, 0, 2.0]), local=False))
    model.loads.append(BodyLoad("f", "b", "force", np.array([1.0, 0, 0]), point=np.array([0, 0.5, 0])))
    sim = mb.Simulation(model.finalize())
    tau = sim.applied_forces()
    # free joint: v = (linear, angular) in the body frame; the local force (1, 0, 0) at (0, 0.5, 0)
    # has the moment (0, 0, -0.5); the world torque about z is about the body's z too (rotation about z)
    np.testing.assert_allclose(tau, [1.0, 0, 0, 0, 0, 2.0 - 0.5], atol=1e-12)


# --- actuators, controls, inputs ---------------------------------------------------------------------

def actuated():
    model = Model("act", gravity=(0, 0, 0))
    model.add_link(Link("b", 2.0, [0, 0, 0], np.eye(3)))
    model.add_joint(Joint("x", "prismatic", None, "b", axis=[1, 0, 0]))
    model.actuators += [Actuator("a", "coordinate", gain=10.0, dof="x", min_control=-1.0, max_control=0.5),
                        Actuator("b", "point", gain=2.0, link1="b", control=0.25)]
    model.loads.append(BodyLoad("driven", "b", "force", np.array([4.0, 0, 0]), modulation=Function.input("throttle")))
    return model.finalize()


def test_controls_are_clamped_named_ordered_and_switched_together():
    sim = mb.Simulation(actuated())
    assert sim.actuator_names == ["a", "b"]
    np.testing.assert_array_equal(sim.controls, [0.0, 0.25])          # initial controls
    assert sim.applied_forces()[0] == pytest.approx(0.5)
    sim.set_control("a", 3.0)                                          # clamped to 0.5
    np.testing.assert_array_equal(sim.controls, [0.5, 0.25])
    assert sim.applied_forces()[0] == pytest.approx(5.0 + 0.5)
    sim.controls = [-4.0, 1.0]
    np.testing.assert_array_equal(sim.controls, [-1.0, 1.0])
    assert sim.applied_forces()[0] == pytest.approx(-10.0 + 2.0)
    assert sim.actuators_enabled
    sim.actuators_enabled = False
    assert sim.applied_forces()[0] == 0.0
    sim.step(10)
    assert sim.v[0] == 0.0
    sim.reset()      # back to the initial controls, actuators on
    assert sim.actuators_enabled and sim.applied_forces()[0] == pytest.approx(0.5)
    with pytest.raises(KeyError, match="no actuator named 'c'; the actuators are a, b"):
        sim.set_control("c", 1.0)
    with pytest.raises(ValueError, match="expected 2 values"):
        sim.controls = [1.0]


def test_inputs_are_zero_until_set_and_scale_what_reads_them():
    sim = mb.Simulation(actuated())
    sim.actuators_enabled = False
    assert sim.input_names == ["throttle"]
    assert sim.applied_forces()[0] == 0.0
    sim.set_input("throttle", 0.75)
    assert sim.applied_forces()[0] == pytest.approx(3.0)
    sim.step(100)                     # constant force 3 N on 2 kg for 0.1 s
    assert sim.v[0] == pytest.approx(0.15, rel=1e-12)
    with pytest.raises(KeyError, match="no input named 'brake'; the inputs are throttle"):
        sim.set_input("brake", 1.0)


# --- force sensors see the applied forces ----------------------------------------------------------

def test_a_spring_below_a_force_sensor_changes_its_reading_by_the_spring_force():
    def world(with_spring):
        m = Model("hang", gravity=(0, 0, -9.81))
        m.add_link(Link("upper", 1.0, [0, 0, -0.5], np.eye(3) * 0.1))
        m.add_link(Link("lower", 2.0, [0, 0, -0.25], np.eye(3) * 0.1))
        m.add_joint(Joint("hip", "revolute", None, "upper", axis=[0, 1, 0]))
        # the sensed joint is locked: the step holds it still, so the reading is static
        m.add_joint(Joint("knee", "prismatic", "upper", "lower", axis=[0, 0, 1], origin=pose(p=(0, 0, -1)),
                          locked=True))
        m.sensors.append(Sensor("ft", "force", "lower"))
        if with_spring:    # from a world point below to a point on the lower link: 120 N along -z
            m.forces.append(SpringDamper("s", None, np.array([0, 0, -3.0]), "lower", np.array([0, 0, -0.5]),
                                         free_length=0.5, stiffness=120.0))
        return m.finalize()
    readings = []
    for with_spring in (False, True):
        sim = mb.Simulation(world(with_spring), dt=1e-3)
        sim.step(20)
        readings.append(sim.readings()["ft"].values)
    # the spring (length 1.5, free 0.5) pulls the lower link down with 120 N: the wrench the
    # subtree exerts on its parent grows by exactly that (to the LCP's rounding); its point of
    # application is on the sensor's axis, so no torque changes
    np.testing.assert_allclose(readings[1] - readings[0], [0, 0, -120.0, 0, 0, 0], atol=1e-6)


# --- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("edit,message", [
    (lambda m: m.forces.append(SpringDamper("s", "nowhere", np.zeros(3), "body", np.zeros(3))),
     "SpringDamper 's': link 'nowhere' does not exist"),
    (lambda m: m.forces.append(CoordinateLimitForce("c", "y", 1, 1, 1, -1, 0, 0.1)),
     "CoordinateLimitForce 'c': DOF 'y' is not one of the model's DOFs"),
    (lambda m: m.actuators.append(Actuator("a", "coordinate", dof="nope")), "actuator 'a': DOF 'nope'"),
    (lambda m: m.forces.append(SpringDamper("s", None, np.zeros(3), "body", np.zeros(3), map_deformations=[0, 1],
                                            map_velocities=[0], map_forces=np.zeros((2, 2)))),
     "map_forces must be"),
    (lambda m: m.forces.append(SpringDamper("s", None, np.zeros(3), "body", np.zeros(3), min_length=2, max_length=1)),
     "min_length 2.0 must be below max_length 1.0"),
    (lambda m: m.forces.append(Bushing("b", None, np.eye(4), "body", np.eye(4), stiffness=np.ones(5))),
     "Bushing 'b': stiffness must be 6 finite numbers"),
    (lambda m: m.forces.append("spring"), "force element str"),
    (lambda m: m.loads.append(BodyLoad("l", "body", "push", np.ones(3))), "body load 'l': kind 'push'"),
])
def test_bad_elements_are_model_errors_naming_them(edit, message):
    model = slider()
    edit(model)
    with pytest.raises(ModelError, match=message):
        mb.Simulation(model)


def test_a_limit_force_on_a_free_joint_dof_is_refused():
    m = Model("f")
    m.add_link(Link("b", 1.0, [0, 0, 0], np.eye(3)))
    m.add_joint(Joint("j", "free", None, "b"))
    m.forces.append(CoordinateLimitForce("c", "j_3", 1, 1, 1, -1, 0, 0.1))
    with pytest.raises(ModelError, match="belongs to a ball or free joint"):
        mb.Simulation(m.finalize())


# --- OpenSim as ground truth ------------------------------------------------------------------------

DEG = np.pi / 180
C1, I1 = np.array([0.1, -0.2, 0.05]), np.array([[0.3, 0.01, 0.02], [0.01, 0.4, 0.03], [0.02, 0.03, 0.5]])
C2, I2 = np.array([0.0, -0.3, 0.1]), np.array([[0.2, -0.01, 0.0], [-0.01, 0.1, 0.02], [0.0, 0.02, 0.25]])
P12 = np.array([0.05, -0.4, 0.1])      # the second joint in body 1
GRAVITY = (0.0, -9.81, 0.0)


def xyz(a, b, c):
    """Body-fixed X-Y-Z rotation (OpenSim's orientation convention)."""
    ca, sa, cb, sb, cc, sc = np.cos(a), np.sin(a), np.cos(b), np.sin(b), np.cos(c), np.sin(c)
    Rx = np.array([[1, 0, 0], [0, ca, -sa], [0, sa, ca]])
    Ry = np.array([[cb, 0, sb], [0, 1, 0], [-sb, 0, cb]])
    Rz = np.array([[cc, -sc, 0], [sc, cc, 0], [0, 0, 1]])
    return Rx @ Ry @ Rz


# one description of every element, built into both engines (angles in radians, SI units)
ELEMENTS = {
    "bushing_ground": dict(kind="bushing", b1=None, o1=(0.1, 0.2, 0.3), p1=(0.1, 0.2, -0.1), b2="b1",
                           o2=(0.0, -0.2, 0.1), p2=(0.0, 0.1, 0.0), rk=(4, 5, 6), tk=(100, 200, 300),
                           rd=(0.4, 0.5, 0.6), td=(1, 2, 3)),
    "bushing_bodies": dict(kind="bushing", b1="b1", o1=(0.0, 0.0, 0.2), p1=(0.05, -0.4, 0.1), b2="b2",
                           o2=(0.1, 0.0, 0.0), p2=(0.0, 0.05, 0.0), rk=(7, 8, 9), tk=(50, 60, 70),
                           rd=(0.7, 0.8, 0.9), td=(3, 2, 1)),
    "point_to_point": dict(kind="p2p", b1=None, p1=(0.2, 0.5, 0.1), b2="b2", p2=(0.1, -0.3, 0.05),
                           k=150.0, rest=0.4),
    "torque": dict(kind="torque", b1="b1", b2="b2", axis=(0.3, 1.0, -0.2), gain=20.0, control=0.7),
    "point": dict(kind="point", b1="b2", point=(0.1, -0.2, 0.3), direction=(1.0, 0.5, -0.3), gain=30.0,
                  control=-0.6),
    "coordinate": dict(kind="coordinate", dof="g1", gain=12.0, control=0.8),
    "limit": dict(kind="limit", dof="g1", upper=20 * DEG, kup=2.0 / DEG, lower=-15 * DEG, klo=3.0 / DEG,
                  damping=0.05 / DEG, transition=8 * DEG),
}


def our_model(element):
    m = Model("osim", gravity=GRAVITY)
    m.add_link(Link("b1_t", 0.0, [0, 0, 0], np.zeros((3, 3))))
    m.add_link(Link("b1", 2.0, C1, I1))
    m.add_link(Link("b2", 1.0, C2, I2))
    # OpenSim's CustomJoint (rotations X, Y, Z body-fixed, then translations X, Y, Z in the parent)
    m.add_joint(Joint("j1t", "translational", None, "b1_t", dof_names=["tx", "ty", "tz"]))
    m.add_joint(Joint("j1r", "euler", "b1_t", "b1", euler_order="xyz", dof_names=["rx", "ry", "rz"]))
    m.add_joint(Joint("j2", "euler", "b1", "b2", euler_order="xyz", origin=pose(p=P12), dof_names=["g0", "g1", "g2"]))
    e = element
    if e["kind"] == "bushing":
        m.forces.append(Bushing("e", e["b1"], pose(xyz(*e["o1"]), e["p1"]), e["b2"], pose(xyz(*e["o2"]), e["p2"]),
                                stiffness=np.r_[e["rk"], e["tk"]], damping=np.r_[e["rd"], e["td"]]))
    elif e["kind"] == "p2p":
        m.forces.append(SpringDamper("e", e["b1"], np.array(e["p1"]), e["b2"], np.array(e["p2"]),
                                     free_length=e["rest"], stiffness=e["k"]))
    elif e["kind"] == "torque":
        m.actuators.append(Actuator("e", "torque", gain=e["gain"], link1=e["b1"], link2=e["b2"], axis=np.array(e["axis"])))
    elif e["kind"] == "point":
        m.actuators.append(Actuator("e", "point", gain=e["gain"], link1=e["b1"], point=np.array(e["point"]),
                                    direction=np.array(e["direction"]), direction_in_world=True))
    elif e["kind"] == "coordinate":
        m.actuators.append(Actuator("e", "coordinate", gain=e["gain"], dof=e["dof"]))
    else:
        m.forces.append(CoordinateLimitForce("e", e["dof"], e["kup"], e["upper"], e["klo"], e["lower"],
                                             e["damping"], e["transition"]))
    return m.finalize()


def opensim_model(osim, element):
    V = lambda x: osim.Vec3(*[float(a) for a in x])   # noqa: E731
    m = osim.Model()
    m.setGravity(V(GRAVITY))
    ground = m.getGround()

    def inertia(I):
        return osim.Inertia(I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2])
    b1 = osim.Body("b1", 2.0, V(C1), inertia(I1))
    b2 = osim.Body("b2", 1.0, V(C2), inertia(I2))
    m.addBody(b1)
    m.addBody(b2)
    st = osim.SpatialTransform()
    for i, name in enumerate(["rx", "ry", "rz", "tx", "ty", "tz"]):
        axis = st.updTransformAxis(i)
        axis.setCoordinateNames(osim.ArrayStr(name, 1))
        axis.setAxis(V(np.eye(3)[i % 3]))
        axis.set_function(osim.LinearFunction(1.0, 0.0))
    m.addJoint(osim.CustomJoint("j1", ground, V((0, 0, 0)), V((0, 0, 0)), b1, V((0, 0, 0)), V((0, 0, 0)), st))
    j2 = osim.GimbalJoint("j2", b1, V(P12), V((0, 0, 0)), b2, V((0, 0, 0)), V((0, 0, 0)))
    for i in range(3):
        j2.upd_coordinates(i).setName(f"g{i}")
    m.addJoint(j2)
    frame = {None: ground, "b1": b1, "b2": b2}
    e = element
    if e["kind"] == "bushing":
        def transform(o, p):
            return osim.Transform(osim.Rotation(osim.BodyRotationSequence, o[0], osim.CoordinateAxis(0), o[1],
                                                osim.CoordinateAxis(1), o[2], osim.CoordinateAxis(2)), V(p))
        force = osim.BushingForce("e", frame[e["b1"]], transform(e["o1"], e["p1"]), frame[e["b2"]],
                                  transform(e["o2"], e["p2"]), V(e["tk"]), V(e["rk"]), V(e["td"]), V(e["rd"]))
    elif e["kind"] == "p2p":
        force = osim.PointToPointSpring(frame[e["b1"]], V(e["p1"]), frame[e["b2"]], V(e["p2"]), e["k"], e["rest"])
    elif e["kind"] == "torque":
        force = osim.TorqueActuator(frame[e["b1"]], frame[e["b2"]], V(e["axis"]), False)
        force.setOptimalForce(e["gain"])
    elif e["kind"] == "point":
        force = osim.PointActuator(e["b1"])
        force.set_point(V(e["point"]))
        force.set_direction(V(e["direction"]))
        force.set_force_is_global(True)
        force.set_point_is_global(False)
        force.setOptimalForce(e["gain"])
    elif e["kind"] == "coordinate":
        force = osim.CoordinateActuator(e["dof"])
        force.setOptimalForce(e["gain"])
    else:   # OpenSim's own units: degrees for a rotational coordinate
        force = osim.CoordinateLimitForce(e["dof"], e["upper"] / DEG, e["kup"] * DEG, e["lower"] / DEG,
                                          e["klo"] * DEG, e["damping"] * DEG, e["transition"] / DEG)
    force.setName("e")
    m.addForce(force)
    state = m.initSystem()
    return m, state, force


def opensim_udot(osim, model, state, force, element, q, v):
    """{coordinate: udot} at q, v (dicts by coordinate name), actuators at gain * control."""
    coords = model.getCoordinateSet()
    for i in range(coords.getSize()):
        c = coords.get(i)
        c.setValue(state, q[c.getName()], False)
        c.setSpeedValue(state, v[c.getName()])
    if "control" in element:
        actuator = osim.ScalarActuator.safeDownCast(force)
        actuator.overrideActuation(state, True)
        actuator.setOverrideActuation(state, element["gain"] * element["control"])
    model.realizeAcceleration(state)
    return {coords.get(i).getName(): coords.get(i).getAccelerationValue(state) for i in range(coords.getSize())}


@pytest.mark.parametrize("name", list(ELEMENTS))
def test_generalized_accelerations_equal_opensims(name):
    osim = pytest.importorskip("opensim", reason="OpenSim's Python package (test extra `opensim`) is the reference")
    element = ELEMENTS[name]
    ours = our_model(element)
    sim = mb.Simulation(ours)
    if "control" in element:
        sim.set_control("e", element["control"])
    theirs, state, force = opensim_model(osim, element)
    names = ours.dof_names
    rng = np.random.default_rng(11)
    for trial in range(4):
        qd = dict(zip(names, rng.uniform(-0.6, 0.6, len(names))))
        if element["kind"] == "limit":    # inside the range, in each transition and beyond
            qd["g1"] = [0.1, 24 * DEG, 35 * DEG, -19 * DEG][trial]
        vd = dict(zip(names, rng.uniform(-1.5, 1.5, len(names))))
        q, v = np.array([qd[n] for n in names]), np.array([vd[n] for n in names])
        sim.q, sim.v = q, v
        qdd = mb.forward_dynamics(ours, q, v, sim.applied_forces())
        qdd_free = mb.forward_dynamics(ours, q, v, np.zeros(len(names)))
        reference = opensim_udot(osim, theirs, state, force, element, qd, vd)
        expected = np.array([reference[n] for n in names])
        # two double-precision codes of the same equations: agreement to ~1e-12 relative
        np.testing.assert_allclose(qdd, expected, rtol=1e-8, atol=1e-9 * np.abs(expected).max(),
                                   err_msg=f"{name}, state {trial}")
        if not (element["kind"] == "limit" and trial == 0):     # the element acts (the test sees it)
            assert np.abs(qdd - qdd_free).max() > 1e-3
