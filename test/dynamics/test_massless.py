"""Models whose moving links are massless (issue 19): kinematics, Jacobians, CRBA and RNEA are
defined and match Pinocchio; forward dynamics and a Simulation name the joints they cannot move,
and a Simulation with massless_armature (MuJoCo's armature, opt-in) moves them by tau / armature."""
import pathlib
import warnings

import numpy as np
import pinocchio as pin
import pytest

import mbsim_ros as mb
from mbsim_ros import ModelError
from test_urdf_vs_pinocchio import mapping, permute_v, to_pin_q

GRIPPER = pathlib.Path(__file__).resolve().parents[1] / "models" / "urdf" / "massless_gripper.urdf"
TOL = 1e-12      # relative: the same sums in another order (as the shared-URDF comparison, tighter)


@pytest.fixture(scope="module")
def both():
    model = mb.load_model(GRIPPER, floating_base=False)     # as Pinocchio's buildModel
    pm = pin.buildModelFromUrdf(str(GRIPPER))
    pm.gravity = pin.Motion(model.gravity, np.zeros(3))
    return model, pm


def test_massless_gripper_crba_rnea_kinematics_match_pinocchio(both):
    model, pm = both
    pd = pm.createData()
    maps = mapping(model, pm)
    rng = np.random.default_rng(1)
    for _ in range(20):
        q = rng.uniform(-1, 1, model.nq) * [1, 1, 0.04, 0.04]
        v, qdd = rng.normal(size=model.nv), rng.normal(size=model.nv)
        qp, vp, ap = to_pin_q(q, maps, pm.nq), permute_v(v, maps, pm.nv), permute_v(qdd, maps, pm.nv)
        M = mb.mass_matrix(model, q)
        Mp = pin.crba(pm, pd, qp)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        perm = permute_v(np.arange(model.nv, dtype=float), maps, model.nv).astype(int)
        np.testing.assert_allclose(M[np.ix_(perm, perm)], Mp, rtol=0, atol=TOL * np.abs(Mp).max())
        # the finger rows and columns are zero: nothing to accelerate
        assert not M[2:, :].any() and not M[:, 2:].any()
        tau = mb.inverse_dynamics(model, q, v, qdd)
        ref = pin.rnea(pm, pd, qp, vp, ap)
        np.testing.assert_allclose(permute_v(tau, maps, pm.nv), ref, rtol=0, atol=TOL * max(1, np.abs(ref).max()))
        pin.forwardKinematics(pm, pd, qp)
        pin.updateFramePlacements(pm, pd)
        T = mb.link_transforms(model, q)
        for name in ("finger_left", "finger_right", "palm"):
            ref_T = pd.oMf[pm.getFrameId(name)].homogeneous
            np.testing.assert_allclose(T[name], ref_T, atol=1e-14)
        J = mb.frame_jacobian(model, q, "finger_left", point=[0.01, 0.0, 0.0])
        Jp = pin.computeFrameJacobian(pm, pd, qp, pm.getFrameId("finger_left"), pin.LOCAL_WORLD_ALIGNED)
        # Pinocchio's frame origin; ours a point 1 cm along x of the finger: v_p = v_o + w x r
        r = T["finger_left"][:3, :3] @ [0.01, 0.0, 0.0]
        Jp[:3] -= np.cross(r, Jp[3:].T).T
        np.testing.assert_allclose(J[:, perm], Jp, atol=1e-14)


def test_forward_dynamics_and_simulation_name_the_massless_joints(both):
    model, _ = both
    q, v = model.neutral_q(), np.zeros(model.nv)
    with pytest.raises(ModelError, match=r"forward_dynamics of model 'massless_gripper': joints "
                                         r"'finger_left_joint', 'finger_right_joint' move only links with no mass"):
        mb.forward_dynamics(model, q, v, np.zeros(model.nv))
    with pytest.raises(ModelError, match=r"Simulation of massless_gripper: joints 'finger_left_joint', "
                                         r"'finger_right_joint' .*massless_armature"):
        mb.Simulation(model, contact="none", bound_massless=False)


def test_massless_fingers_get_a_bounded_mass_and_move_as_pinocchio_says(both):
    """By default a Simulation gives massless leaves 1 % of the mass and central inertia of the
    body they hang from (the palm: 0.3 kg, trace 7e-4 kg m^2), at their origin, with one note.
    The first step's acceleration equals Pinocchio's ABA for the same URDF with those inertias
    put on the fingers (relative 1e-9: one semi-implicit Euler step from rest is v = dt qdd)."""
    model, pm = both
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim = mb.Simulation(model, dt=0.001, contact="none")
    mass, inertia = 0.003, 0.01 * 7e-4 / 3
    (note,) = sim.notes
    assert note.startswith("joints finger_left_joint, finger_right_joint move only links without mass: they get "
                           "1% of palm's mass and inertia (0.003 kg, 2.33e-06 kg m^2)")
    assert [str(w.message) for w in caught] == sim.notes
    pm = pin.buildModelFromUrdf(str(GRIPPER))
    pm.gravity = pin.Motion(model.gravity, np.zeros(3))
    for name in ("finger_left", "finger_right"):
        frame = pm.frames[pm.getFrameId(name)]
        pm.inertias[frame.parentJoint] = pin.Inertia(mass, np.zeros(3), inertia * np.eye(3))
    q = np.array([0.3, -0.2, 0.01, 0.02])
    tau = np.array([0.5, 0.1, 0.002, -0.001])
    sim.q[:], sim.tau[:] = q, tau
    sim.step()
    maps = mapping(model, pm)
    ref = pin.aba(pm, pm.createData(), to_pin_q(q, maps, pm.nq), np.zeros(pm.nv), permute_v(tau, maps, pm.nv))
    np.testing.assert_allclose(permute_v(sim.v / sim.dt, maps, pm.nv), ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())


def test_massless_armature_opt_in_moves_the_fingers_by_tau_over_armature(both):
    model, _ = both
    armature = 0.01
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim = mb.Simulation(model, dt=0.001, contact="none", massless_armature=armature)
    assert sim.notes == ["joints finger_left_joint, finger_right_joint move only massless links: "
                         "armature 0.01 on their DOFs (massless_armature)"]
    assert any(str(w.message) == sim.notes[0] for w in caught)
    sim.q[:] = [0.0, 0.0, 0.01, 0.01]
    sim.tau[:] = [0.0, 0.0, 0.002, -0.001]
    sim.step(10)
    # a massless finger's DOF is a free rotor of inertia `armature`: v = tau / armature * t,
    # whatever the arm does (no mass couples it); the arm falls under gravity meanwhile
    np.testing.assert_allclose(sim.v[2:], np.array([0.002, -0.001]) / armature * sim.t, rtol=1e-12)
    # only the massless DOFs got the armature: the arm's mass matrix diagonal is untouched
    assert sim.compiled.tree.armature.tolist() == [0.0, 0.0, armature, armature]
    with pytest.raises(ValueError, match="massless_armature must be a finite number >= 0"):
        mb.Simulation(model, contact="none", massless_armature=-1.0)


def test_bush_joint_chain_of_massless_links_matches_pinocchio():
    """OpenHRP's bush-joint chain (three Joints without a Segment, then a massive foot): ABA,
    CRBA and RNEA through the massless links equal Pinocchio's for the same tree."""
    from pin_reference import to_pinocchio
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mb.load_model(GRIPPER.parents[1] / "openhrp" / "bush_chain.wrl")
    pm = to_pinocchio(model)
    pd = pm.createData()
    rng = np.random.default_rng(3)
    for _ in range(10):
        q, v, tau = rng.uniform(-1, 1, model.nq), rng.normal(size=model.nv), rng.normal(size=model.nv)
        M = pin.crba(pm, pd, q)
        M = np.triu(M) + np.triu(M, 1).T
        np.testing.assert_allclose(mb.mass_matrix(model, q), M, rtol=0, atol=TOL * np.abs(M).max())
        ref = pin.aba(pm, pd, q, v, tau)
        np.testing.assert_allclose(mb.forward_dynamics(model, q, v, tau), ref, rtol=0, atol=1e-10 * max(1, np.abs(ref).max()))
        ref = pin.rnea(pm, pd, q, v, tau)
        np.testing.assert_allclose(mb.inverse_dynamics(model, q, v, tau), ref, rtol=0, atol=TOL * max(1, np.abs(ref).max()))


def test_kinematics_only_opensim_model(tmp_path):
    """An OpenSim model with no mass anywhere (kinematics only): poses, Jacobians, M = 0 and
    tau = 0 are defined; forward dynamics names both joints."""
    text = (GRIPPER.parents[1] / "opensim" / "unnamed_joints.osim").read_text()
    import re
    text = re.sub(r"<mass>[^<]*</mass>", "<mass>0</mass>", text)
    text = re.sub(r"<inertia>[^<]*</inertia>", "<inertia>0 0 0 0 0 0</inertia>", text)
    path = tmp_path / "kinematics_only.osim"
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mb.load_model(path)
    q = model.initial_q()
    assert model.total_mass == 0.0
    assert set(mb.link_transforms(model, q)) >= {"upper", "lower", "tip"}
    assert mb.frame_jacobian(model, q, "tip")[3:].any()
    assert not mb.mass_matrix(model, q).any()
    assert not mb.inverse_dynamics(model, q, np.ones(model.nv), np.ones(model.nv)).any()
    with pytest.raises(ModelError, match="joints 'pinjoint', 'pinjoint_0' move only links with no mass"):
        mb.forward_dynamics(model, q, q, q)
