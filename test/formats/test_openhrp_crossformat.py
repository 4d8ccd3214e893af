"""SR1.wrl (OpenHRP, Choreonoid 2017) and SR1.urdf (Choreonoid 2026) describe the same robot.

What matches: total mass (130.8 kg), the link names, the 29 revolute joint names and axes, the
rotational inertias, every link transform at random joint positions. What does not: the root
joint's name (WAIST in the .wrl, root_joint from load_model(floating_base=True)), the masses of
the 8 shoulder/elbow links (redistributed within each arm, same total) and the centres of mass of
27 of the 30 links: the two files carry different mass data. So the mass matrices are equal only
once the URDF model is given the .wrl's masses and COMs; test_sr1_mass_data_differs pins the
difference down, so a change in either file shows up.
"""
import numpy as np
import pytest
from conftest import shared_model

import mbsim_ros as mb
from mbsim_ros.formats.openhrp import load_openhrp

pin = pytest.importorskip("pinocchio")


@pytest.fixture(scope="module")
def both():
    wrl = load_openhrp(shared_model("openhrp", "SR1.wrl"))
    urdf = mb.load_model(shared_model("urdf", "SR1.urdf"), floating_base=True)
    return wrl, urdf


def random_q(wrl, urdf, rng):
    """The same configuration for both models, mapped by joint name (root: WAIST <-> root_joint)."""
    q_w, q_u = wrl.neutral_q(), urdf.neutral_q()
    pose = np.concatenate([rng.uniform(-1, 1, 3), rng.normal(size=4)])
    pose[3:] /= np.linalg.norm(pose[3:])
    q_w[:7], q_u[urdf.joint("root_joint").q_index:][:7] = pose, pose
    for j in wrl.joints[1:]:
        value = rng.uniform(-1.5, 1.5)
        q_w[j.q_index] = value
        q_u[urdf.joint(j.name).q_index] = value
    return q_w, q_u


def test_same_total_mass_links_and_joint_names(both):
    wrl, urdf = both
    assert wrl.total_mass == pytest.approx(urdf.total_mass) == pytest.approx(130.8)
    assert {j.name for j in wrl.joints} - {"WAIST"} == {j.name for j in urdf.joints} - {"root_joint"}
    assert wrl.joint("WAIST").type == urdf.joint("root_joint").type == "free"
    assert {l.name for l in wrl.links} == {l.name for l in urdf.links}
    for link in wrl.links:
        np.testing.assert_allclose(link.inertia, urdf.link(link.name).inertia, atol=1e-12, err_msg=link.name)
    for j in wrl.joints[1:]:
        assert urdf.joint(j.name).type == j.type == "revolute"


def test_same_link_transforms_at_random_positions(both):
    wrl, urdf = both
    rng = np.random.default_rng(3)
    for _ in range(5):
        q_w, q_u = random_q(wrl, urdf, rng)
        T_w, T_u = mb.link_transforms(wrl, q_w), mb.link_transforms(urdf, q_u)
        for name in T_w:
            np.testing.assert_allclose(T_w[name], T_u[name], atol=1e-9, err_msg=name)


def test_sr1_mass_data_differs(both):
    """The data difference between the two files (read off them): link masses and COMs."""
    wrl, urdf = both
    differ = {l.name for l in wrl.links if not np.allclose(l.com, urdf.link(l.name).com)}
    assert differ == {l.name for l in wrl.links} - {"WAIST", "LARM_SHOULDER_R", "RARM_SHOULDER_R"}
    masses = {l.name: (l.mass, urdf.link(l.name).mass) for l in wrl.links if l.mass != urdf.link(l.name).mass}
    arm = {"SHOULDER_P": (0.4, 3.0), "SHOULDER_R": (2.2, 0.6), "SHOULDER_Y": (0.4, 1.0), "ELBOW": (2.2, 0.6)}
    assert masses == {f"{side}ARM_{j}": m for side in "LR" for j, m in arm.items()}
    np.testing.assert_allclose(wrl.link("CHEST").com, [0, 0, 0.08])      # SR1.wrl WAIST_LINK3
    np.testing.assert_allclose(urdf.link("CHEST").com, [0, 0, 0])        # SR1.urdf CHEST inertial


def test_same_mass_matrix_given_the_same_mass_data(both):
    wrl = both[0]
    urdf = mb.load_model(shared_model("urdf", "SR1.urdf"), floating_base=True)   # a copy to edit
    for link in urdf.links:
        link.mass, link.com = wrl.link(link.name).mass, wrl.link(link.name).com.copy()
    urdf.finalize()
    order = [urdf.joint(j.name if j.name != "WAIST" else "root_joint") for j in wrl.joints]
    perm = np.concatenate([np.arange(j.v_index, j.v_index + j.nv) for j in order])
    rng = np.random.default_rng(5)
    for _ in range(5):
        q_w, q_u = random_q(wrl, urdf, rng)
        M_w = mb.mass_matrix(wrl, q_w)
        M_u = mb.mass_matrix(urdf, q_u)[np.ix_(perm, perm)]
        np.testing.assert_allclose(M_w, M_u, atol=1e-9)


def pinocchio_from_model(model):
    """A Pinocchio model built straight from our Model's joints and links (free/revolute only)."""
    pm = pin.Model()
    ids = {None: 0}
    for j in model.joints:
        placement = pin.SE3(j.origin[:3, :3], j.origin[:3, 3])
        if j.type == "free":
            jm = pin.JointModelFreeFlyer()
        elif j.type == "revolute":
            jm = pin.JointModelRevoluteUnaligned(*j.axis)
        else:
            raise NotImplementedError(j.type)
        jid = pm.addJoint(ids[j.parent], jm, placement, j.name)
        link = model.link(j.child)
        pm.appendBodyToJoint(jid, pin.Inertia(link.mass, link.com, link.inertia), pin.SE3.Identity())
        ids[j.child] = jid
    return pm


def test_mass_matrix_against_pinocchio_on_the_loaded_wrl():
    """Independent of our dynamics: the loaded .wrl Model through Pinocchio's CRBA equals
    Pinocchio on SR1.urdf given the .wrl's masses and COMs (so frames and axes agree), and our
    mass_matrix on the .wrl Model equals Pinocchio's."""
    wrl = load_openhrp(shared_model("openhrp", "SR1.wrl"))
    ours = pinocchio_from_model(wrl)
    ref = pin.buildModelFromUrdf(str(shared_model("urdf", "SR1.urdf")), pin.JointModelFreeFlyer())
    for jid in range(2, ref.njoints):
        link = wrl.link(ref.names[jid])
        ref.inertias[jid] = pin.Inertia(link.mass, link.com, link.inertia)
    ref.inertias[1] = pin.Inertia(wrl.link("WAIST").mass, wrl.link("WAIST").com, wrl.link("WAIST").inertia)
    for _ in range(5):
        q = pin.randomConfiguration(ours, -np.ones(ours.nq), np.ones(ours.nq))
        q_ref = pin.neutral(ref)
        q_ref[:7] = q[:7]
        for jid in range(2, ours.njoints):
            q_ref[ref.joints[ref.getJointId(ours.names[jid])].idx_q] = q[ours.joints[jid].idx_q]
        M = pin.crba(ours, ours.createData(), q)
        M = np.triu(M) + np.triu(M, 1).T
        M_ref = pin.crba(ref, ref.createData(), q_ref)
        M_ref = np.triu(M_ref) + np.triu(M_ref, 1).T
        perm = [0, 1, 2, 3, 4, 5] + [ref.joints[ref.getJointId(ours.names[jid])].idx_v for jid in range(2, ours.njoints)]
        np.testing.assert_allclose(M, M_ref[np.ix_(perm, perm)], atol=1e-9)
        # and our own dynamics agrees with Pinocchio on the .wrl Model
        q_ours = np.concatenate([q[:7]] + [[q[ours.joints[jid].idx_q]] for jid in range(2, ours.njoints)])
        np.testing.assert_allclose(mb.mass_matrix(wrl, q_ours), M, atol=1e-9)
