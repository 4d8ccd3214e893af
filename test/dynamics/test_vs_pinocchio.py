"""ABA, RNEA, CRBA, kinematics and Jacobians equal Pinocchio's on random trees of every joint type.

Tolerance: relative 1e-9 (issue 2). Both libraries compute in double precision with O(n)
recursions; differences are rounding, ~1e-13 relative, so 1e-9 catches any real error."""
import numpy as np
import pinocchio as pin
import pytest

import mbsim_ros as mb
from pin_reference import SHARED_TYPES, random_state, random_tree, to_pinocchio

REL = 1e-9


def close(a, b, rel=REL):
    scale = max(1.0, np.abs(b).max())
    return np.abs(np.asarray(a) - np.asarray(b)).max() <= rel * scale


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("floating", [True, False])
def test_random_trees_match_pinocchio(seed, floating):
    rng = np.random.default_rng(seed)
    model = random_tree(rng, n_links=14, floating=floating)
    pm = to_pinocchio(model)
    pd = pm.createData()
    assert (pm.nq, pm.nv) == (model.nq, model.nv)
    for _ in range(100):
        q, v, tau = random_state(rng, model)
        qdd = mb.forward_dynamics(model, q, v, tau)
        assert close(qdd, pin.aba(pm, pd, q, v, tau, pin.Convention.WORLD))
        assert close(mb.inverse_dynamics(model, q, v, qdd), pin.rnea(pm, pd, q, v, qdd))
        M = pin.crba(pm, pd, q, pin.Convention.WORLD)
        M = np.triu(M) + np.triu(M, 1).T
        assert close(mb.mass_matrix(model, q), M)


@pytest.mark.parametrize("joint_type", [t for t in SHARED_TYPES if t != "fixed"])
def test_each_joint_type_alone_matches_pinocchio(joint_type):
    """A chain made of one joint type only, so a failure names the joint type at fault."""
    rng = np.random.default_rng(7)
    model = random_tree(rng, n_links=4, types=(joint_type,), floating=False)
    pm = to_pinocchio(model)
    pd = pm.createData()
    for _ in range(20):
        q, v, tau = random_state(rng, model)
        assert close(mb.forward_dynamics(model, q, v, tau), pin.aba(pm, pd, q, v, tau, pin.Convention.WORLD))


def test_link_transforms_and_jacobians_match_pinocchio():
    rng = np.random.default_rng(11)
    model = random_tree(rng, n_links=14)
    pm = to_pinocchio(model)
    pd = pm.createData()
    for _ in range(20):
        q, v, _ = random_state(rng, model)
        pin.forwardKinematics(pm, pd, q, v)
        pin.updateFramePlacements(pm, pd)
        pin.computeJointJacobians(pm, pd, q)
        T = mb.link_transforms(model, q)
        vel = mb.link_velocities(model, q, v)
        for link in model.links:
            fid = pm.getFrameId(link.name)
            assert close(T[link.name], pd.oMf[fid].homogeneous)
            J = mb.frame_jacobian(model, q, link.name)
            Jp = pin.getFrameJacobian(pm, pd, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
            assert close(J, Jp)
            assert close(vel[link.name], Jp @ v)


def test_link_accelerations_match_pinocchio_classical_accelerations():
    rng = np.random.default_rng(12)
    model = random_tree(rng, n_links=14)
    pm = to_pinocchio(model)
    pd = pm.createData()
    for _ in range(20):
        q, v, qdd = random_state(rng, model)
        pin.forwardKinematics(pm, pd, q, v, qdd)
        pin.updateFramePlacements(pm, pd)
        acc = mb.link_accelerations(model, q, v, qdd)
        for link in model.links:
            fid = pm.getFrameId(link.name)
            ref = pin.getFrameClassicalAcceleration(pm, pd, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
            assert close(acc[link.name], np.concatenate([ref.linear, ref.angular]))
