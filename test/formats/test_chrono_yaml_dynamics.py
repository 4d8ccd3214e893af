"""Chrono YAML models simulated: springs, motors and the slider-crank against analytic answers.

Models: the shared slider-crank and motors files (../shared/models/chrono_yaml/mbs), and our own
small files in test/models/chrono_yaml (no gravity, one element each).
"""
import math
import warnings

import numpy as np
import pytest
from conftest import OWN_MODELS, shared_model
from scipy.interpolate import RegularGridInterpolator

import mbsim_ros as mb

OWN = OWN_MODELS / "chrono_yaml"
PROBE_DT = 1e-7      # s: one step this short measures a force as m dv/dt with O(dt) error ~1e-7 relative


def load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mb.load_model(path)


def build_simulation(model, dt=None):
    return mb.Simulation(model, dt=dt or model.settings["time_step"])


def q_of(sim, model, joint):
    return sim.q[model.joint(joint).q_index]


def v_of(sim, model, joint):
    return sim.v[model.joint(joint).v_index]


def probe_acceleration(model, set_state, dof):
    """(dv/dt of DOF `dof`) over one PROBE_DT step from the state set_state(sim) makes."""
    sim = build_simulation(model, PROBE_DT)
    set_state(sim)
    v0 = sim.v[dof]
    sim.step()
    return (sim.v[dof] - v0) / PROBE_DT


# ---------------------------------------------------------------- spring-dampers
def test_tsda_oscillates_at_sqrt_k_over_m_with_the_analytic_decay():
    model = load(OWN / "tsda_oscillator.yaml")
    m, k, c, l0, x0 = 2.0, 50.0, 0.4, 1.0, 1.2
    alpha = c / (2 * m)
    wd = math.sqrt(k / m - alpha ** 2)
    sim = build_simulation(model)
    j = model.joint("mass_free")
    xs, ts = [], []
    for _ in range(500):                      # 5 s in 10 ms samples
        sim.step(100)
        ts.append(sim.t)
        xs.append(sim.q[j.q_index])
    t = np.array(ts)
    expected = l0 + (x0 - l0) * np.exp(-alpha * t) * (np.cos(wd * t) + alpha / wd * np.sin(wd * t))
    # 1e-4 m: semi-implicit Euler at 1e-4 s keeps the phase within ~1e-6 rad over 25 rad and the
    # decay within O(c dt / m) relative; 1e-4 m is 0.05 % of the 0.2 m amplitude
    np.testing.assert_allclose(xs, expected, atol=1e-4)
    # the motion stays on the spring's line
    np.testing.assert_allclose(sim.q[j.q_index + 1:j.q_index + 3], 0, atol=1e-9)


def test_curve_tsda_reproduces_its_force_table():
    model = load(OWN / "tsda_curve.yaml")
    m, preload, l0 = 0.5, 2.0, 0.8
    spring = {"x": [-0.5, 0, 0.2, 0.5], "f": [-40, 0, 30, 120]}
    damping = {"x": [-1, 0, 1], "f": [-3, 0, 5]}
    dof = model.joint("slide").v_index
    for deformation in (-0.7, -0.5, -0.2, 0.0, 0.1, 0.2, 0.35, 0.5, 0.9):
        for rate in (-2.0, -0.4, 0.0, 0.6):
            def state(sim):
                sim.q[model.joint("slide").q_index] = l0 + deformation - 1.0   # the slider starts at length 1
                sim.v[dof] = rate
            # Chrono's ChFunctionInterp: linear inside the table, the end value outside
            force = preload - np.interp(deformation, spring["x"], spring["f"]) - np.interp(rate, damping["x"], damping["f"])
            # 1e-5 relative + 1e-6 N: one PROBE_DT step, force evaluated at the start or end of it
            assert m * probe_acceleration(model, state, dof) == pytest.approx(force, rel=1e-5, abs=1e-6), (deformation, rate)


def test_map_tsda_interpolates_bilinearly_and_extrapolates_linearly():
    model = load(OWN / "tsda_curve.yaml")
    defs, vels = [0.5, 1.0, 1.5], [-1, 0, 1]
    table = np.array([[-10, 5, 30], [-8, 10, 40], [-6, 15, 50]])     # rows: velocity, columns: length
    interp = RegularGridInterpolator((vels, defs), table, method="linear", bounds_error=False, fill_value=None)
    j = model.joint("slide2")
    for length in (0.3, 0.7, 1.0, 1.3, 1.8):
        for rate in (-1.5, -0.5, 0.25, 1.4):
            def state(sim):
                sim.q[j.q_index] = length - 1.0
                sim.v[j.v_index] = rate
            force = -float(interp([[rate, length]])[0])     # preload 0; the map's force resists
            assert 0.5 * probe_acceleration(model, state, j.v_index) == pytest.approx(force, rel=1e-5, abs=1e-6), (length, rate)


def test_rsda_oscillates_about_its_free_angle_with_the_analytic_decay():
    model = load(OWN / "rsda.yaml")
    inertia, k, c, free = 0.5, 3.0, 0.05, math.radians(10)
    alpha = c / (2 * inertia)
    wd = math.sqrt(k / inertia - alpha ** 2)
    sim = build_simulation(model)
    angles, ts = [], []
    for _ in range(500):
        sim.step(100)
        ts.append(sim.t)
        angles.append(q_of(sim, model, "axle"))
    t = np.array(ts)
    expected = free - free * np.exp(-alpha * t) * (np.cos(wd * t) + alpha / wd * np.sin(wd * t))
    np.testing.assert_allclose(angles, expected, atol=1e-4)   # rad; as the TSDA's (amplitude 0.17 rad)


def test_curve_rsda_reproduces_its_torque_table():
    model = load(OWN / "rsda.yaml")
    j = model.joint("axle2")
    for angle in (-1.5, -0.5, 0.0, 0.3, 1.0, 2.0):
        def state(sim):
            sim.q[j.q_index] = angle
        torque = -np.interp(angle, [-1, 0, 1], [-2, 0, 4])
        assert 0.5 * probe_acceleration(model, state, j.v_index) == pytest.approx(torque, rel=1e-5, abs=1e-6), angle


# ---------------------------------------------------------------- motors
def integral(f, t, n=20001):
    """int_0^t f, trapezoid on a grid fine enough for the smooth functions used here."""
    s = np.linspace(0, t, n)
    return float(np.trapezoid(f(s), s)) if hasattr(np, "trapezoid") else float(np.trapz(f(s), s))


def test_each_motor_kind_tracks_its_function():
    model = load(OWN / "motors.yaml")
    motors = {m.name: m for m in model.motors}
    sim = build_simulation(model)
    worst = dict(position=0.0, speed=0.0, linear_position=0.0, linear_speed=0.0)
    for _ in range(100):                   # 2 s in 20 ms samples
        sim.step(200)
        t = sim.t
        # Chrono: body1 (the rotor, the tree child here) turns by f(t) relative to body2
        worst["position"] = max(worst["position"], abs(q_of(sim, model, "position") - motors["position"].function(t)))
        worst["speed"] = max(worst["speed"], abs(v_of(sim, model, "speed") - motors["speed"].function(t)))
        worst["linear_position"] = max(worst["linear_position"],
                                       abs(q_of(sim, model, "linear_position") - motors["linear_position"].function(t)))
        worst["linear_speed"] = max(worst["linear_speed"],
                                    abs(v_of(sim, model, "linear_speed") - motors["linear_speed"].function(t)))
    # position within 1e-4 (rad, m) and speed within 1e-4 (rad/s, m/s): the bounds
    assert max(worst.values()) < 1e-4, worst
    # the speed motor's position is the integral of its speed (t^2 for the ramp 2t), summed per
    # step: the rectangle rule's dt |f(t) - f(0)| / 2 (2e-4 rad here) plus 1e-6 of rounding
    sum_tol = sim.dt * 4.0 / 2 + 1e-6
    assert q_of(sim, model, "speed") == pytest.approx(sim.t ** 2, abs=sum_tol)
    s = integral(motors["linear_speed"].function, sim.t)
    assert q_of(sim, model, "linear_speed") == pytest.approx(s, abs=sum_tol)
    # the world poses: the linear position motor moves along (1, 0, 1)/sqrt(2) keeping its pitch
    T = sim.link_transforms()["slider_position"]
    d = motors["linear_position"].function(sim.t)
    np.testing.assert_allclose(T[:3, 3], np.array([0, 3, 0]) + d * np.array([1, 0, 1]) / math.sqrt(2), atol=1e-4)
    np.testing.assert_allclose(T[:3, :3], [[math.cos(0.3), 0, math.sin(0.3)], [0, 1, 0], [-math.sin(0.3), 0, math.cos(0.3)]],
                               atol=1e-9)


def test_force_motors_apply_their_function_exactly():
    """Each step's velocity change of a force-driven DOF (alone on its joint, no gravity, no
    other force) is dt f(t) / inertia, with f at one fixed instant of the step."""
    model = load(OWN / "motors.yaml")
    motors = {m.name: m for m in model.motors}
    sim = build_simulation(model)
    dt = sim.dt
    instants = {"start": 0.0, "middle": 0.5, "end": 1.0}
    misses = {name: {k: 0.0 for k in instants} for name in ("torque", "linear_force")}
    for _ in range(300):
        sim.step(37)                       # sample steps spread over 1.1 s
        t0 = sim.t
        before = sim.v.copy()
        sim.step()
        for name, inertia in (("torque", 0.5), ("linear_force", 2.0)):
            dof = model.joint(name).v_index
            applied = inertia * (sim.v[dof] - before[dof]) / dt
            for k, x in instants.items():
                misses[name][k] = max(misses[name][k], abs(applied - motors[name].function(t0 + x * dt)))
    for name, by_instant in misses.items():
        # 1e-9 N (N m): exact up to rounding, at whichever instant of the step the solver uses
        assert min(by_instant.values()) < 1e-9, (name, by_instant)


def test_torque_motor_angle_matches_the_double_integral():
    model = load(OWN / "motors.yaml")
    sim = build_simulation(model)
    sim.step(20000)                        # 2 s
    t, inertia, w, phase = sim.t, 0.5, 2 * math.pi, 0.5
    theta = (0.8 * (t * math.cos(phase) / w - (math.sin(w * t + phase) - math.sin(phase)) / w ** 2) + 0.05 * t ** 2) / inertia
    # semi-implicit Euler's positions are off by about a t dt / 2 (a the acceleration, 1.5e-4 m
    # for the 1.5 m/s^2 slider at 2 s): 2e-4 bounds both
    assert q_of(sim, model, "torque") == pytest.approx(theta, abs=2e-4)
    assert q_of(sim, model, "linear_force") == pytest.approx(0.75 * t ** 2, abs=2e-4)   # 3 N on 2 kg


def test_shared_motors_file_tracks_each_motor():
    """The real motors model for 0.2 s (before the sliders reach the obstacles)."""
    model = load(shared_model("chrono_yaml", "mbs", "model_motors.yaml"))
    motors = {m.name: m for m in model.motors}
    sim = build_simulation(model, 1e-4)           # the model file alone: solver_mbs.yaml's time step
    for _ in range(20):
        sim.step(100)
        t = sim.t
        assert q_of(sim, model, "motor_A2") == pytest.approx(motors["motor_A2"].function(t), abs=1e-4)
        assert v_of(sim, model, "motor_A1") == pytest.approx(1.57, abs=1e-4)
        assert q_of(sim, model, "motor_B1") == pytest.approx(motors["motor_B1"].function(t), abs=1e-4)
        assert v_of(sim, model, "motor_B2") == pytest.approx(motors["motor_B2"].function(t), abs=1e-4)
        # 200 N on the 40 kg slider3 along x (semi-implicit Euler: off by 5 t dt / 2 <= 5e-5 m)
        assert q_of(sim, model, "motor_B3") == pytest.approx(0.5 * 5.0 * t ** 2, abs=1e-4)


# ---------------------------------------------------------------- the slider-crank
def test_slider_crank_follows_its_motor_and_the_crank_slider_relation():
    model = load(shared_model("chrono_yaml", "mbs", "mbs.yaml"))
    (motor,) = model.motors
    (loop,) = model.constraints
    sim = build_simulation(model)                # the solver file's 1e-4 s
    r, rod = 2.0, 4.0                      # crank radius (motor axis to the crank pin), rod length
    f = motor.function
    worst = dict(speed=0.0, angle=0.0, slider=0.0, loop=0.0)
    for _ in range(250):                   # 5 s in 20 ms samples
        sim.step(200)
        t = sim.t
        # Chrono turns body1 (ground) relative to body2 (crank) at f: the crank turns at -f about +y
        worst["speed"] = max(worst["speed"], abs(v_of(sim, model, "ground_crank") + f(t)))
        crank = q_of(sim, model, "ground_crank")
        worst["angle"] = max(worst["angle"], abs(crank + integral(f, t, 4001)))
        poses = sim.link_transforms()
        slider = poses["slider"][0, 3]
        worst["slider"] = max(worst["slider"], abs(slider - (-r * math.cos(crank) + math.sqrt(rod ** 2 - (r * math.sin(crank)) ** 2))))
        pa = poses[loop.link1][:3, :3] @ loop.pos1 + poses[loop.link1][:3, 3]
        pb = poses[loop.link2][:3, :3] @ loop.pos2 + poses[loop.link2][:3, 3]
        worst["loop"] = max(worst["loop"], float(np.linalg.norm(pa - pb)))
    assert worst["speed"] < 1e-4, worst        # rad/s: the speed motor follows its function
    # rad: a first-order step holding the speed at the step's end integrates it by the rectangle
    # rule, dt max|f| / 2 = 1.6e-4 rad behind the exact integral at 1e-4 s (Chrono's implicit Euler
    # too); beyond that term the angle follows within 1e-5
    assert worst["angle"] < sim.dt * 3.14 / 2 + 1e-5, worst
    assert worst["slider"] < 1e-4, worst       # m: the analytic crank-slider relation
    assert worst["loop"] < 1e-5, worst         # m: the spherical joint's loop closure
    # the DATA speed function over 5 s turns the crank 4 * 3.14 rad
    assert q_of(sim, model, "ground_crank") == pytest.approx(-4 * 3.14, abs=1e-3)
