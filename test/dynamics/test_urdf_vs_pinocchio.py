"""ABA, RNEA and CRBA equal Pinocchio's on every URDF in ../shared/models/urdf, fixed and
floating base, at 100 random states each (relative 1e-9, issue 2).

Pinocchio orders joints its own way and gives continuous joints two coordinates (cos, sin),
so states are mapped joint by joint through the names."""
import warnings

import numpy as np
import pinocchio as pin
import pytest

import mbsim_ros as mb
from conftest import shared_models

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
