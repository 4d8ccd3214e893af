"""ABA, RNEA and CRBA equal Pinocchio's on every URDF in ../shared/models/urdf, fixed and
floating base, at 100 random states each (relative 1e-9, issue 2).

Pinocchio orders joints its own way and gives continuous joints two coordinates (cos, sin),
so states are mapped joint by joint through the names."""
import warnings

import numpy as np
import pinocchio as pin
import pytest

import mbsim_ros as mb
from conftest import shared_model, shared_models

URDFS = shared_models("urdf", "*.urdf")


def load_both(path, floating):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # missing UR5 meshes: expected, tested in formats
        model = mb.load_model(path, floating_base=floating)
    pm = (pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if floating
          else pin.buildModelFromUrdf(str(path)))
    pm.gravity = pin.Motion(model.gravity, np.zeros(3))
    return model, pm


def mapping(model, pm):
    """Per joint: (our q slice, our v slice, pinocchio q slice, v slice, continuous?)."""
    out = []
    for j in model.joints:
        if j.nv == 0:
            continue
        jid = pm.getJointId(j.name)
        assert jid < pm.njoints, f"Pinocchio has no joint {j.name}"
        iq, iv, nqp = pm.idx_qs[jid], pm.idx_vs[jid], pm.nqs[jid]
        out.append((slice(j.q_index, j.q_index + j.nq), slice(j.v_index, j.v_index + j.nv),
                    slice(iq, iq + nqp), slice(iv, iv + j.nv), nqp == 2 and j.nq == 1))
    return out


def to_pin_q(q, maps, nq):
    qp = np.zeros(nq)
    for oq, _, pq, _, continuous in maps:
        qp[pq] = [np.cos(q[oq][0]), np.sin(q[oq][0])] if continuous else q[oq]
    return qp


def permute_v(x, maps, nv):
    out = np.zeros(nv)
    for _, ov, _, pv, _ in maps:
        out[pv] = x[ov]
    return out


@pytest.mark.parametrize("floating", [False, True])
@pytest.mark.parametrize("path", URDFS, ids=[p.name for p in URDFS])
def test_shared_urdf_dynamics_match_pinocchio(path, floating):
    model, pm = load_both(path, floating)
    pd = pm.createData()
    assert (model.nv, pm.nv) == (pm.nv, model.nv)
    maps = mapping(model, pm)
    perm = permute_v(np.arange(model.nv, dtype=float), maps, model.nv).astype(int)  # pin v index -> ours
    rng = np.random.default_rng(0)
    for _ in range(100):
        q = model.neutral_q()
        for j in model.joints:
            if j.type == "free":
                quat = rng.normal(size=4)
                q[j.q_index:j.q_index + 7] = np.r_[rng.uniform(-1, 1, 3), quat / np.linalg.norm(quat)]
            elif j.nq == 1:
                q[j.q_index] = rng.uniform(-np.pi, np.pi)
        v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
        qp, vp, taup = to_pin_q(q, maps, pm.nq), permute_v(v, maps, pm.nv), permute_v(tau, maps, pm.nv)
        qdd = mb.forward_dynamics(model, q, v, tau)
        ref = pin.aba(pm, pd, qp, vp, taup)
        scale = max(1.0, np.abs(ref).max())
        assert np.abs(permute_v(qdd, maps, pm.nv) - ref).max() <= 1e-9 * scale
        ref = pin.rnea(pm, pd, qp, vp, permute_v(qdd, maps, pm.nv))
        ours = permute_v(mb.inverse_dynamics(model, q, v, qdd), maps, pm.nv)
        assert np.abs(ours - ref).max() <= 1e-9 * max(1.0, np.abs(ref).max())
        Mp = pin.crba(pm, pd, qp)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        M = mb.mass_matrix(model, q)[np.ix_(perm, perm)]
        assert np.abs(M - Mp).max() <= 1e-9 * np.abs(Mp).max()


@pytest.mark.parametrize("at_limit", [1, 2, 4, 5, 7])
def test_a_step_into_joint_limits_gives_pinocchios_constrained_velocities(at_limit):
    """SR1 on a floating base, `at_limit` joints just below their upper limit and moving into it:
    after one step their velocities land exactly on the limit (the speculative rows' targets),
    every DOF as v* + M^-1 J^T x with Pinocchio's ABA and M^-1 (x solving J v+ = target with
    the solver's cfm). Up to constraints.ABA_SOLVE_ROWS rows the step solves them from ABA's
    articulated inertias, above from CRBA and its factor: both paths are checked."""
    path = shared_model("urdf", "SR1.urdf")
    model, pm = load_both(path, True)
    pd = pm.createData()
    maps = mapping(model, pm)
    dt, cfm = 0.001, 1e-5
    sim = mb.Simulation(model, dt=dt, cfm=cfm)
    rng = np.random.default_rng(3)
    q = model.neutral_q()
    q[3:7] = [0.0, 0.0, 0.0, 1.0]
    v = 0.2 * rng.standard_normal(model.nv)
    limited = [j for j in model.joints if j.nq == 1 and np.isfinite(j.upper).all()]
    rows = []
    for j in limited:
        q[j.q_index] = 0.5 * (j.lower[0] + j.upper[0])
    for j in limited[::3][:at_limit]:            # spread over the limbs
        q[j.q_index] = j.upper[0] - 1e-4
        v[j.v_index] = 1.0                       # crosses the limit within this step
        rows.append(j.v_index)
    sim.q[:], sim.v[:] = q, v
    sim.step()
    assert sim.stats()["rows"] == at_limit
    qp, vp = to_pin_q(q, maps, pm.nq), permute_v(v, maps, pm.nv)
    v_star = vp + dt * pin.aba(pm, pd, qp, vp, np.zeros(pm.nv))
    Minv = pin.computeMinverse(pm, pd, qp)
    Minv = np.triu(Minv) + np.triu(Minv, 1).T
    J = np.zeros((at_limit, pm.nv))
    target = np.zeros(at_limit)
    pin_rows = [int(permute_v(np.eye(model.nv)[iv], maps, pm.nv).argmax()) for iv in rows]
    for k, piv in enumerate(pin_rows):
        J[k, piv] = -1.0
        target[k] = -1e-4 / dt                   # J v+ = -gap / dt: on the limit at the step's end
    A = J @ Minv @ J.T
    A[np.diag_indices(at_limit)] *= 1.0 + cfm
    x = np.linalg.solve(A, target - J @ v_star)
    assert (x > 0).all(), "every row must be active for this reference"
    expected = v_star + Minv @ J.T @ x
    ours = permute_v(sim.v, maps, pm.nv)
    revolute = np.abs(ours - expected)[6:]       # the free joint's v is turned to its new frame
    assert revolute.max() <= 1e-9, revolute.max()
    assert np.abs(ours[pin_rows] - 1e-4 / dt).max() <= 1e-3      # on the limit, within cfm's give
