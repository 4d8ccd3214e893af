"""The MJCF loader against MuJoCo itself: every MJCF model shipped in PyPI's gymnasium and
dm_control (the test extra installs them) and our feature fixture, at random states: link poses
vs xpos/xmat, the mass matrix vs mj_fullM, bias forces vs qfrc_bias, joint springs and dampers
vs qfrc_passive, accelerations vs qacc (constraints and actuation disabled). Tolerance 1e-9
relative: both sides are double precision; what is left is MuJoCo's iterative eigen
decomposition of inertias (about 1e-12) and rounding."""
import os
import warnings

import numpy as np
import pytest

from conftest import OWN_MODELS
import mjcf_reference as ref

mujoco = pytest.importorskip("mujoco")

TOL = 1e-9
FIXTURES = sorted(str(p) for p in (OWN_MODELS / "mjcf").glob("*.xml") if "_defaults" not in p.name)


def _mujoco_model(path):
    try:
        return mujoco.MjModel.from_xml_path(path)
    except Exception:       # a file MuJoCo refuses (missing asset, a fragment) is no reference
        return None


ASSETS = ref.asset_files()
MUJOCO = {p: _mujoco_model(p) for p in ASSETS}
VALID = [p for p in ASSETS if MUJOCO[p] is not None]


def _id(path):
    parts = path.replace(os.sep, "/").split("/")
    return "/".join(parts[-2:])


def test_the_asset_packages_are_installed():
    assert len(VALID) >= 60, f"only {len(VALID)} MJCF models MuJoCo loads found in gymnasium and dm_control"


@pytest.mark.parametrize("path", FIXTURES + VALID, ids=_id)
def test_dynamics_and_poses_equal_mujoco(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        worst = ref.compare(path, states=2, m=MUJOCO.get(path))
    bad = {k: v for k, v in worst.items() if not v <= TOL}
    assert not bad, f"{path}: relative errors above {TOL:g}: {bad}"


def test_the_fixture_uses_what_it_claims():
    import mbsim_ros as mb
    model = mb.load_model(str(OWN_MODELS / "mjcf" / "features.xml"))
    kinds = {j.type for j in model.joints}
    assert {"free", "revolute", "prismatic", "ball"} <= kinds
    arm = [j for j in model.joints if j.name.startswith("arm_")]
    assert [j.child for j in arm] == ["arm_arm_yaw", "arm_arm_pitch", "arm"]   # a chain in one body
    assert model.link("arm_arm_yaw").mass == 0.0
    assert np.allclose(model.gravity, [0.5, -1, -9.7])
    assert model.settings["time_step"] == 0.002
    assert "imu_site" in {f.name for f in model.frames}


@pytest.mark.parametrize("path", FIXTURES + VALID, ids=_id)
def test_the_pairs_that_may_collide_are_mujocos(path):
    ours, theirs = ref.our_body_pairs(path), ref.mujoco_body_pairs(path)
    assert ours == theirs, (f"{path}: ours only {sorted(map(sorted, ours - theirs))[:5]}, "
                            f"MuJoCo only {sorted(map(sorted, theirs - ours))[:5]}")


def test_the_contact_fixture_uses_every_filter():
    m = mujoco.MjModel.from_xml_path(str(OWN_MODELS / "mjcf" / "contacts.xml"))
    assert (m.nexclude, m.npair) == (1, 1)
    pairs = ref.our_body_pairs(str(OWN_MODELS / "mjcf" / "contacts.xml"))
    assert {frozenset(p) for p in (("f", "g"), ("upper", "base"), ("a", "c"), ("b", "c"))} <= pairs
    assert not {frozenset(p) for p in (("a", "b"), ("d", "e"), ("upper", "lower"), ("upper", "hand"),
                                       ("f", "a"), ("base", "worldbody"))} & pairs


def _equality_rows_hold(path, model, locked=()):
    """At random states with each coupler's dependent joint set from its independent one (and
    the locked joints where they start), MuJoCo's equality rows report no violation (efc_pos;
    1e-12: rounding). Returns how many rows were checked."""
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(3)
    for _ in range(5):
        d.qpos[:] = m.qpos0 + rng.uniform(-0.5, 0.5, m.nq)
        for name in locked:
            d.qpos[m.joint(name).qposadr[0]] = m.qpos0[m.joint(name).qposadr[0]]
        for c in model.couplers:
            d.qpos[m.joint(c.dependent).qposadr[0]] = c.function(d.qpos[m.joint(c.independent).qposadr[0]])
        mujoco.mj_forward(m, d)
        rows = d.efc_type[:d.nefc] == mujoco.mjtConstraint.mjCNSTR_EQUALITY
        assert np.abs(d.efc_pos[:d.nefc][rows]).max() < 1e-12, d.efc_pos[:d.nefc][rows]
    return int(rows.sum())


def test_tendon_equalities_hold_where_mujocos_do():
    """Our couplers' q_dependent = f(q_independent), put into MuJoCo's qpos, satisfy MuJoCo's
    own tendon equality constraints."""
    import mbsim_ros as mb
    path = str(OWN_MODELS / "mjcf" / "tendons.xml")
    model = mb.load_model(path)
    assert {c.name for c in model.couplers} == {"fingers", "thumb"} and model.joint("nail").locked
    assert _equality_rows_hold(path, model, locked=["nail"]) == 3


def test_a_tendon_whose_first_coefficient_is_zero_ties_the_other_joint(tmp_path):
    import mbsim_ros as mb
    path = tmp_path / "zero.xml"
    path.write_text('<mujoco><worldbody><body><joint name="a"/><geom size="0.1"/><body pos="0 0 0.5">'
                    '<joint name="b" type="slide"/><geom size="0.1"/></body></body></worldbody>'
                    '<tendon><fixed name="t"><joint joint="a" coef="0"/><joint joint="b" coef="2"/></fixed></tendon>'
                    '<equality><tendon tendon1="t" polycoef="0.1 0 0 0 0"/></equality></mujoco>')
    model = mb.load_model(str(path))
    (coupler,) = model.couplers
    assert (coupler.dependent, coupler.independent) == ("b", "a")
    assert _equality_rows_hold(str(path), model) == 1
