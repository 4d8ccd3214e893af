"""Joint limits, velocity and effort limits, locked joints, loop closures."""
import numpy as np
import pytest

import mbsim_ros as mb
from conftest import shared_model
from mbsim_ros.model import Joint, Link, LoopConstraint, Model
from mbsim_ros.model.transforms import make_transform

G = 9.80665


def pendulum(**joint):
    """A 1 kg point-like bob on a 0.5 m arm, hinge about y at the origin, arm along x."""
    m = Model("pendulum")
    m.add_link(Link("arm", 1.0, [0.5, 0, 0], np.eye(3) * 1e-3))
    m.add_joint(Joint("hinge", "revolute", None, "arm", axis=[0, 1, 0], **joint))
    return m.finalize()


def test_a_joint_driven_into_its_limit_stops_there_and_leaves_it_freely():
    sim = mb.Simulation(pendulum(lower=[-1.0], upper=[0.5]), dt=1e-3)
    sim.tau = [20.0]                    # +y torque: pushes q up against the upper limit at 0.5
    highest = -np.inf
    for _ in range(1000):
        sim.step()
        highest = max(highest, sim.q[0])
    assert highest - 0.5 < 1e-3          # overshoot
    assert sim.q[0] == pytest.approx(0.5, abs=1e-3)
    sim.tau = [-20.0]                    # pull away: it must not stick
    sim.step(100)
    assert sim.q[0] < 0.45 and sim.v[0] < 0
    lowest = np.inf
    for _ in range(1000):
        sim.step()
        lowest = min(lowest, sim.q[0])
    assert -1.0 - lowest < 1e-3



def test_a_limit_rows_impulse_is_the_next_steps_warm_start():
    """A pendulum held on its upper limit: each step's limit impulse is kept on its DOF for the
    next step's warm start (the active set the LCP tries first), equal to the impulse that
    holds the torque, and dropped once the joint leaves the limit."""
    sim = mb.Simulation(pendulum(lower=[-1.0], upper=[0.5]), dt=1e-3)
    sim.tau = [20.0]
    sim.step(1000)
    s = sim.constraints.solver
    assert sim.stats()["rows"] == 1 and s.row_kind[0] != 0
    # the row (J = -1) holds tau and gravity's moment about y, m g 0.5 cos q, which pushes the same way
    hold = (20.0 + 1.0 * G * 0.5 * np.cos(0.5)) * 1e-3
    assert s.x[0] == pytest.approx(hold, rel=1e-3)
    assert s.joint_x[0, 0] == s.x[0] and s.joint_x[1, 0] == 0.0
    sim.tau = [-20.0]
    sim.step(100)
    assert sim.stats()["rows"] == 0 and s.joint_x[0, 0] == 0.0

def test_velocity_limit_caps_the_speed_and_effort_limit_caps_the_torque():
    sim = mb.Simulation(pendulum(velocity_limit=[2.0]), dt=1e-3)
    sim.tau = [50.0]
    peak = 0.0
    for _ in range(500):
        sim.step()
        peak = max(peak, abs(sim.v[0]))
    # CFM (1e-5) lets a row yield by that fraction of what it removes: here v* - 2 <= dt tau / I
    # = 0.2 rad/s per step, so at most 2e-6 over the limit
    assert 1.99 < peak < 2.0 + 1e-5 * 0.2 * 1.1

    # an effort limit of 3 N m: a request of 50 acts as 3 (gravity off to compare cleanly)
    limited = pendulum(effort_limit=[3.0])
    limited.gravity[:] = 0
    sim = mb.Simulation(limited, dt=1e-3)
    sim.tau = [50.0]
    sim.step(10)
    inertia = 1e-3 + 1.0 * 0.5 ** 2
    assert sim.v[0] == pytest.approx(3.0 / inertia * 0.01, rel=1e-9)


def test_a_locked_joint_holds_its_initial_position_against_torque_and_gravity():
    m = pendulum(q0=[0.3])
    m.joints[0].locked = True
    sim = mb.Simulation(m, dt=1e-3)
    sim.tau = [5.0]
    sim.step(2000)
    assert sim.q[0] == pytest.approx(0.3, abs=1e-6)


def four_bar(a=0.1, b=0.3, c=0.25, d=0.3, crank0=np.radians(60), crank_rate=3.0, kind="ball"):
    """Crank a (joint at the origin), coupler b, rocker c (joint at (d, 0)), all about z; the
    coupler's end is tied to the rocker's end by a loop closure. Returns (model, rocker angle
    from Freudenstein's equation as a function of the crank angle, open branch)."""
    def rocker_angle(th2):
        # the coupler end is at distance b from the crank end A and c from the rocker pivot O4
        A = np.array([a * np.cos(th2), a * np.sin(th2)])
        O4 = np.array([d, 0.0])
        r = np.linalg.norm(A - O4)
        base = np.arctan2(A[1] - O4[1], A[0] - O4[0])
        return base + np.arccos((c ** 2 + r ** 2 - b ** 2) / (2 * c * r))

    th4 = rocker_angle(crank0)
    B = np.array([d + c * np.cos(th4), c * np.sin(th4)])
    A = np.array([a * np.cos(crank0), a * np.sin(crank0)])
    th3 = np.arctan2(*(B - A)[::-1])
    m = Model("four_bar", gravity=(0, 0, -G))      # planar in xy: gravity does no work
    rod = lambda name, length: Link(name, 1.0, [length / 2, 0, 0],
                                    np.diag([1e-4, length ** 2 / 12, length ** 2 / 12]))
    m.add_link(Link("base"))
    m.add_joint(Joint("weld", "fixed", None, "base"))
    m.add_link(rod("crank", a))
    m.add_joint(Joint("crank_joint", "revolute", "base", "crank", q0=[crank0], v0=[crank_rate]))
    m.add_link(rod("coupler", b))
    m.add_joint(Joint("coupler_joint", "revolute", "crank", "coupler",
                      origin=make_transform(p=[a, 0, 0]), q0=[th3 - crank0]))
    m.add_link(rod("rocker", c))
    m.add_joint(Joint("rocker_joint", "revolute", "base", "rocker",
                      origin=make_transform(p=[d, 0, 0]), q0=[th4]))
    m.constraints.append(LoopConstraint("tie", kind, "coupler", "rocker", [b, 0, 0], [c, 0, 0],
                                        [0, 0, 1]))
    return m.finalize(), rocker_angle


@pytest.mark.parametrize("kind", ["ball", "xy"])
def test_a_four_bar_follows_freudensteins_relation(kind):
    model, rocker_angle = four_bar(kind=kind)
    sim = mb.Simulation(model, dt=1e-3)
    crank_index = model.joint("crank_joint").q_index
    rocker_index = model.joint("rocker_joint").q_index
    worst = 0.0
    sim.tau[model.joint("crank_joint").v_index] = 0.02   # keeps the crank turning (it is Grashof)
    for _ in range(6000):
        sim.step()
        error = sim.q[rocker_index] - rocker_angle(sim.q[crank_index])
        worst = max(worst, abs((error + np.pi) % (2 * np.pi) - np.pi))     # angles modulo 2 pi
    assert sim.q[crank_index] - np.radians(60) > 2 * np.pi   # it really turned
    assert worst < 1e-3


def loop_error(sim, lc):
    T = sim.link_transforms()
    pa = T[lc.link1][:3, :3] @ lc.pos1 + T[lc.link1][:3, 3]
    pb = T[lc.link2][:3, :3] @ lc.pos2 + T[lc.link2][:3, 3]
    axis = T[lc.link1][:3, :3] @ lc.axis
    gap = pa - pb
    if lc.type in ("xy", "piston"):
        gap = gap - axis * axis.dot(gap)     # only the directions across the axis are tied
    return np.linalg.norm(gap)


@pytest.mark.parametrize("name", ["closed-link-sample.wrl", "ClosedLinkSample.wrl"])
def test_openhrp_closed_link_samples_stay_closed_over_ten_seconds_of_motion(name):
    model = mb.load_model(shared_model("openhrp", name))
    lc = model.constraints[0]
    sim = mb.Simulation(model, dt=1e-3)
    crank = model.joint("J0")
    sim.v[crank.v_index] = 2.0
    worst = 0.0
    travel = 0.0
    for k in range(10000):
        # a torque that keeps the linkage moving back and forth
        sim.tau[crank.v_index] = 0.5 * np.sin(2 * np.pi * 0.5 * sim.t)
        sim.step()
        travel += abs(sim.v[crank.v_index]) * sim.dt
        if k % 10 == 0:
            worst = max(worst, loop_error(sim, lc))
    assert travel > 5.0                    # radians: it really moved
    assert worst < 1e-4


def test_the_free_motion_through_the_mass_matrix_factor_equals_abas():
    # The step takes v* = v + dt H^-1 (tau - C) from H's factor when its LCP will need that
    # factor (contacts, or the last step had more limit rows than aba_solve takes), else from
    # ABA. Both are exact: equal to rounding (1e-12 of the largest velocity change: about 35
    # DOFs' worth of float64 rounding through two different factorizations). SR1 in the air,
    # random velocities and torques, joint damping and armature on every joint DOF.
    from mbsim_ros.dynamics.constraints import STAT_ROWS
    model = mb.load_model(str(shared_model("urdf", "SR1.urdf")), floating_base=True)
    for joint in model.joints:
        if joint.type in ("revolute", "prismatic"):
            joint.damping = np.full(1, 2.0)
            joint.rotor_inertia = np.full(1, 0.01)
    rng = np.random.default_rng(3)
    v0, tau0 = rng.standard_normal(model.nv) * 0.5, rng.standard_normal(model.nv)
    change = {}
    for path, rows_before in (("aba", 0), ("factor", 10)):
        sim = mb.Simulation(model, dt=1e-3, contact="none")
        for joint in model.joints:         # mid-range: no limit reached, no LCP
            if joint.nq == 1 and joint.lower is not None and joint.upper is not None:
                sim.q[joint.q_index] = 0.5 * (float(np.ravel(joint.lower)[0]) + float(np.ravel(joint.upper)[0]))
        sim.v[:] = v0
        sim.tau[:] = tau0
        sim.constraints.solver.stats[STAT_ROWS] = rows_before     # as if the last step had them
        sim.step()
        assert sim.stats()["rows"] == 0                   # no limit reached: no LCP
        # H's factor is in Data.M when (and only when) the free motion came from it
        assert np.any(sim._data.M != 0.0) == (path == "factor")
        change[path] = sim.v - v0
    scale = np.abs(change["aba"]).max()
    assert scale > 1e-3
    assert np.abs(change["factor"] - change["aba"]).max() <= 1e-12 * scale
