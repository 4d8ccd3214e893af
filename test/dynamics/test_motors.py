"""Motors (Chrono's ChLinkMotorRotation* / ChLinkMotorLinear*) and coordinate couplers
(OpenSim's CoordinateCouplerConstraint) in the Simulation.

Ground truth: the motors' own functions (position and speed tracked to 1e-4, force motors'
accelerations exact), the analytic crank-slider relation x = r cos(theta) + sqrt(L^2 - r^2
sin^2(theta)) (issue 8's acceptance test, on a slider-crank built by hand), free fall along a
cylindrical spindle, and the coupling function itself."""
import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros.model import CoordinateCoupler, Function, Joint, Link, Model, ModelError, Motor, Sensor

G = 9.81


def pose(R=np.eye(3), p=(0.0, 0.0, 0.0)):
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, p
    return T


def frame_with_z(z, p=(0.0, 0.0, 0.0)):
    """A frame at p whose z axis is z (x, y completing it)."""
    z = np.asarray(z, float) / np.linalg.norm(z)
    x = np.cross([0.0, 1.0, 0.0] if abs(z[1]) < 0.9 else [1.0, 0.0, 0.0], z)
    x /= np.linalg.norm(x)
    return pose(np.column_stack([x, np.cross(z, x), z]), p)


def run(sim, seconds, every=None):
    """(times, [value(sim) after each step]) over `seconds`."""
    n = int(round(seconds / sim.dt))
    out = []
    for _ in range(n):
        sim.step()
        out.append(every(sim))
    return np.arange(1, n + 1) * sim.dt, np.array(out)


def motor_coordinate(sim, motor):
    """The motor's coordinate from the link poses (rotation: the angle about frame1's z from
    frame1's x to frame2's x, mod 2 pi; linear: frame2's origin along frame1's z)."""
    T = sim.link_transforms()
    T1 = motor.frame1 if motor.link1 is None else T[motor.link1] @ motor.frame1
    T2 = motor.frame2 if motor.link2 is None else T[motor.link2] @ motor.frame2
    if motor.kind == "linear":
        return T1[:3, 2] @ (T2[:3, 3] - T1[:3, 3])
    return np.arctan2(T2[:3, 0] @ T1[:3, 1], T2[:3, 0] @ T1[:3, 0])


# --- one-DOF motors ---------------------------------------------------------------------------

SWING = Function.sine(0.5, 0.5)                     # 0.5 sin(pi t)
SPEED = Function.sine(1.0, 3 / (2 * np.pi), 0.0, 2.0)   # 2 + sin(3 t)


def one_dof(kind, actuation, function, gravity=(0.0, -G, 0.0), v0=0.0):
    """A pendulum about z (rotation motors) or a slider along x (linear motors), its motor
    between the world and the link, frames coinciding at q = 0 (so the motor coordinate is q)."""
    m = Model("one", gravity=gravity)
    m.add_link(Link("link", 1.5, [0.3, -0.2, 0.0], np.diag([0.05, 0.06, 0.07])))
    axis = [0, 0, 1] if kind == "rotation" else [1, 0, 0]
    m.add_joint(Joint("q", "revolute" if kind == "rotation" else "prismatic", None, "link",
                      origin=pose(p=(0.1, 0.2, 0.3)), axis=axis, v0=[v0]))
    frame = frame_with_z(axis, (0.1, 0.2, 0.3))
    m.motors.append(Motor("motor", kind, None, frame, "link", pose(frame[:3, :3]), actuation, function))
    return m.finalize()


@pytest.mark.parametrize("kind", ["rotation", "linear"])
def test_position_motor_tracks_its_function(kind):
    model = one_dof(kind, "position", SWING, v0=SWING(0.0, 1))
    sim = mb.Simulation(model, dt=1e-3)
    t, q = run(sim, 3.0, lambda s: s.q[0])
    # the motor row makes q(t + dt) = f(t + dt) but for the LCP's CFM (1e-5 of the step's
    # velocity change, ~1e-10 rad): 1e-7, far inside issue 8's 1e-4
    assert np.abs(q - SWING(t)).max() < 1e-7
    np.testing.assert_allclose([motor_coordinate(sim, model.motors[0])], [SWING(3.0)], atol=1e-7)


@pytest.mark.parametrize("kind", ["rotation", "linear"])
def test_speed_motor_tracks_its_function_and_integrates_it(kind):
    model = one_dof(kind, "speed", SPEED, v0=SPEED(0.0))
    sim = mb.Simulation(model, dt=1e-3)
    t, v = run(sim, 4.0, lambda s: s.v[0])
    # the velocity after each step is the function there, but for the CFM's 1e-5 of the step's
    # velocity change (~1e-7): 1e-6, inside issue 8's 1e-4
    assert np.abs(v - SPEED(t)).max() < 1e-6
    # 4 s at ~2 rad/s: more than a turn, and the position is the integral of the speeds
    assert sim.q[0] == pytest.approx(np.sum(SPEED(t)) * sim.dt, abs=1e-7)


def test_a_multi_turn_position_motor_counts_turns():
    spin = Function.linear(10.0)              # 10 rad/s: 3 turns in 2 s
    sim = mb.Simulation(one_dof("rotation", "position", spin, v0=10.0), dt=1e-3)
    t, q = run(sim, 2.0, lambda s: s.q[0])
    assert np.abs(q - 10.0 * t).max() < 1e-7


@pytest.mark.parametrize("kind", ["rotation", "linear"])
def test_force_motor_applies_its_function_exactly(kind):
    torque = Function.sine(3.0, 0.4, 0.2)
    model = one_dof(kind, "force", torque, gravity=(0.0, 0.0, 0.0))
    sim = mb.Simulation(model, dt=1e-3)
    sim.step(137)
    # the generalized force along the motor axis is the function's value at the current time
    assert sim.applied_forces()[0] == pytest.approx(torque(sim.t), abs=1e-12)
    v = sim.v[0]
    sim.step()
    inertia = mb.mass_matrix(model, sim.q)[0, 0]       # constant for both (rotation about a fixed axis)
    # one step: dv = dt f(t) / inertia, no other force acts (no gravity, no joint forces)
    assert (sim.v[0] - v) / sim.dt == pytest.approx(torque(sim.t - sim.dt) / inertia, rel=1e-12)


# --- motors with their own guides on free bodies ------------------------------------------------

AXIS = np.array([0.3, -0.4, 0.85])


def guided(kind, guide, function, gravity=(0.0, 0.0, -G)):
    """A free body held only by its motor (and the motor's guide) to the world; frames at the
    body's origin with z along AXIS, the body's centre of mass off the axis."""
    m = Model("guided", gravity=gravity)
    m.add_link(Link("body", 2.0, [0.2, 0.1, -0.1], np.diag([0.05, 0.07, 0.09])))
    frame = frame_with_z(AXIS, (0.5, -0.2, 1.0))
    q0 = np.r_[frame[:3, 3], 0, 0, 0, 1]
    m.add_joint(Joint("free", "free", None, "body", q0=q0))
    # the body's frame is the world's at q0 translated: frame2 in the body = frame1's rotation
    m.motors.append(Motor("motor", kind, None, frame, "body", pose(frame[:3, :3]), "position", function,
                          guide=guide))
    return m.finalize()


def guide_errors(sim, motor):
    """(distance of frame2's origin from frame1's z axis, along it, angle between the z axes,
    frame2 x's tilt out of frame1's xy plane)."""
    T = sim.link_transforms()["body"]
    T1, T2 = motor.frame1, T @ motor.frame2
    d = T2[:3, 3] - T1[:3, 3]
    z1 = T1[:3, 2]
    return (np.linalg.norm(d - z1 * (z1 @ d)), z1 @ d, np.arccos(np.clip(z1 @ T2[:3, 2], -1, 1)),
            abs(z1 @ T2[:3, 0]))


def test_a_rotation_motor_with_a_revolute_spindle_holds_a_free_body_on_its_axis():
    model = guided("rotation", "revolute", SWING)
    sim = mb.Simulation(model, dt=1e-3)
    t, out = run(sim, 3.0, lambda s: (motor_coordinate(s, model.motors[0]),) + guide_errors(s, model.motors[0]))
    # Baumgarte-stabilized rows: the angle to 1e-4 rad (issue 8), the spindle to 1e-5 m / rad
    assert np.abs(out[:, 0] - SWING(t)).max() < 1e-4
    assert np.abs(out[:, 1:4]).max() < 1e-5


def test_a_rotation_motor_with_a_cylindrical_spindle_lets_the_body_fall_along_its_axis():
    model = guided("rotation", "cylindrical", SWING, gravity=-G * AXIS / np.linalg.norm(AXIS))
    sim = mb.Simulation(model, dt=1e-3)
    t, out = run(sim, 1.0, lambda s: (motor_coordinate(s, model.motors[0]),) + guide_errors(s, model.motors[0]))
    assert np.abs(out[:, 0] - SWING(t)).max() < 1e-4
    assert np.abs(out[:, [1, 3]]).max() < 1e-5
    # free fall along the axis: -g t^2 / 2, semi-implicit Euler's first-order error g t dt / 2 ~ 5e-3 m
    np.testing.assert_allclose(out[:, 2], -G * t * t / 2, atol=6e-3)


@pytest.mark.parametrize("guide", ["prismatic", "spherical"])
def test_a_linear_motor_with_a_guide_holds_a_free_body_on_its_line(guide):
    model = guided("linear", guide, SWING)
    sim = mb.Simulation(model, dt=1e-3)
    R0 = sim.link_transforms()["body"][:3, :3]
    t, out = run(sim, 3.0, lambda s: guide_errors(s, model.motors[0])
                 + (np.linalg.norm(s.link_transforms()["body"][:3, :3] - R0),))
    assert np.abs(out[:, 1] - SWING(t)).max() < 1e-4
    assert out[:, 0].max() < 1e-5
    turned = out[:, 4].max()
    if guide == "prismatic":     # orientation held
        assert turned < 1e-5
    else:                        # a point on a line: the off-axis centre of mass makes it swing
        assert turned > 0.1


# --- a slider-crank driven by a motor (issue 8's acceptance test) -----------------------------------

R_CRANK, L_ROD = 2.0, 4.0         # the Chrono example's dimensions


def slider_crank(free_crank):
    """Crank about z at the origin (tip at x = r when theta = 0), rod from the crank tip, slider
    on x, one ball loop closure rod end - slider. free_crank: the crank on a free joint held by
    its motor's revolute spindle (as Chrono's file has it) instead of a revolute joint."""
    m = Model("slider_crank", gravity=(0.0, -G, 0.0))
    m.add_link(Link("crank", 1.0, [R_CRANK / 2, 0, 0], np.diag([0.005, 0.1, 0.1])))
    m.add_link(Link("rod", 0.5, [L_ROD / 2, 0, 0], np.diag([0.005, 0.1, 0.1])))
    m.add_link(Link("slider", 1.0, [0, 0, 0], np.eye(3) * 0.05))
    omega = np.pi
    # consistent initial speeds at theta = 0: rod angle psi with sin psi = -r sin(theta) / L
    m.add_joint(Joint("crank", "free" if free_crank else "revolute", None, "crank",
                      v0=[0, 0, 0, 0, 0, omega] if free_crank else [omega]))
    m.add_joint(Joint("rod", "revolute", "crank", "rod", origin=pose(p=(R_CRANK, 0, 0)),
                      v0=[-omega * (1 + R_CRANK / L_ROD)]))
    m.add_joint(Joint("slide", "prismatic", None, "slider", axis=[1, 0, 0], origin=pose(p=(R_CRANK + L_ROD, 0, 0))))
    from mbsim_ros.model import LoopConstraint
    m.constraints.append(LoopConstraint("close", "ball", "rod", "slider", np.array([L_ROD, 0, 0]), np.zeros(3)))
    m.motors.append(Motor("drive", "rotation", None, np.eye(4), "crank", np.eye(4), "position",
                          Function.linear(omega), guide="revolute" if free_crank else "free"))
    return m.finalize()


@pytest.mark.parametrize("free_crank", [False, True])
def test_slider_crank_follows_its_motor_and_the_crank_slider_relation(free_crank):
    model = slider_crank(free_crank)
    dt = 1e-4                       # the Chrono example's time step

    def state(s):
        T = s.link_transforms()
        rod_end = T["rod"][:3, :3] @ [L_ROD, 0, 0] + T["rod"][:3, 3]
        return (motor_coordinate(s, model.motors[0]), T["slider"][0, 3], np.linalg.norm(rod_end - T["slider"][:3, 3]),
                np.linalg.norm(T["crank"][:3, 3]), abs(T["crank"][2, 2] - 1))
    sim = mb.Simulation(model, dt=dt)
    t, out = run(sim, 5.0, state)
    theta = np.pi * t
    assert np.abs(np.angle(np.exp(1j * (out[:, 0] - theta)))).max() < 1e-4      # the crank follows f(t)
    x = R_CRANK * np.cos(theta) + np.sqrt(L_ROD ** 2 - (R_CRANK * np.sin(theta)) ** 2)
    assert np.abs(out[:, 1] - x).max() < 1e-4                                    # the slider: 1e-4 m
    assert out[:, 2].max() < 1e-5                                                # the loop: 1e-5 m
    assert out[:, 3].max() < 1e-5 and out[:, 4].max() < 1e-5                     # the spindle holds the crank


# --- coordinate couplers ----------------------------------------------------------------------

def coupled(function):
    """Two pendulums about z; b's angle is coupled to a's, a swings under gravity."""
    m = Model("coupled", gravity=(0.0, -G, 0.0))
    for name in ("a", "b"):
        m.add_link(Link(name, 1.0, [0, -0.5, 0], np.eye(3) * 0.02))
    a0 = 0.8
    m.add_joint(Joint("a", "revolute", None, "a", q0=[a0]))
    m.add_joint(Joint("b", "revolute", None, "b", origin=pose(p=(1.0, 0, 0)), q0=[function(a0)]))
    m.couplers.append(CoordinateCoupler("knee", "b", "a", function))
    return m.finalize()


def test_a_coupled_coordinate_follows_its_function_while_the_independent_one_swings():
    f = Function.polynomial([0.1, 0.5, 0.2, -0.3])
    sim = mb.Simulation(coupled(f), dt=1e-3)
    _, q = run(sim, 3.0, lambda s: s.q.copy())
    assert np.ptp(q[:, 0]) > 1.4                               # a swings through +-0.8 rad
    # second-order targets: the coupling holds to ~1e-7 rad at 2.5 rad/s
    assert np.abs(q[:, 1] - f(q[:, 0])).max() < 1e-6


def test_rk4_refuses_motors_couplers_and_guides_by_name():
    with pytest.raises(ValueError, match="coordinate coupler 'knee'"):
        mb.Simulation(coupled(Function.linear(1.0)), integrator="rk4", contact="none")
    with pytest.raises(ValueError, match="revolute motor guide 'motor', position motor 'motor'"):
        mb.Simulation(guided("rotation", "revolute", SWING), integrator="rk4", contact="none")
    # a force motor without a guide is a smooth force: RK4 takes it
    mb.Simulation(one_dof("rotation", "force", SWING), integrator="rk4", contact="none")


@pytest.mark.parametrize("edit,message", [
    (lambda m: setattr(m.motors[0], "guide", "hinge"), "motor 'motor': guide 'hinge' of a rotation motor"),
    (lambda m: setattr(m.motors[0], "link1", "link"), "motor 'motor': link1 and link2 are the same"),
    (lambda m: setattr(m.motors[0], "link2", "nothing"), "motor 'motor': link 'nothing' does not exist"),
    (lambda m: m.couplers.append(CoordinateCoupler("c", "q", "q", Function.linear(1.0))),
     "coordinate coupler 'c': the dependent and independent DOF are the same"),
    (lambda m: m.couplers.append(CoordinateCoupler("c", "q", "p", Function.linear(1.0))),
     "coordinate coupler 'c' independent: DOF 'p' is not one of the model's DOFs"),
    (lambda m: setattr(m.motors[0], "frame1", np.ones((4, 4))), "motor 'motor' frame1: the pose's rotation"),
])
def test_bad_motors_and_couplers_are_model_errors_naming_them(edit, message):
    model = one_dof("rotation", "position", SWING)
    edit(model)
    with pytest.raises(ModelError, match=message):
        mb.Simulation(model)


def test_a_force_sensor_across_a_motor_is_refused_by_name():
    m = Model("arm", gravity=(0.0, -G, 0.0))
    m.add_link(Link("upper", 1.0, [0.2, 0, 0], np.eye(3) * 0.01))
    m.add_link(Link("lower", 1.0, [0.2, 0, 0], np.eye(3) * 0.01))
    m.add_joint(Joint("shoulder", "revolute", None, "upper"))
    m.add_joint(Joint("elbow", "revolute", "upper", "lower", origin=pose(p=(0.4, 0, 0))))
    m.sensors.append(Sensor("ft", "force", "lower"))
    # the motor drives the lower link from the world: its constraint force enters the sensed
    # subtree from outside, which the sensor's inverse dynamics cannot see
    m.motors.append(Motor("drive", "rotation", None, pose(p=(0.4, 0, 0)), "lower", np.eye(4), "position",
                          Function.linear(1.0)))
    with pytest.raises(mb.SensorConfigError, match="position motor 'drive' joins its subtree"):
        mb.Simulation(m.finalize())
    m.motors[0].link2 = "upper"     # driving the parent only: outside the sensed subtree, fine
    m.motors[0].frame1 = np.eye(4)
    sim = mb.Simulation(m.finalize())
    sim.step(5)
    assert "ft" in sim.readings()
