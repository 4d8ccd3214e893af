"""OpenSim itself is the ground truth for the .osim loader: for our own models and every model
in ../shared/models/opensim, each body's pose in ground equals OpenSim's at the default state
and at random states, the initial speeds are OpenSim's, and with every force off the
generalized accelerations equal OpenSim's."""
import warnings

import numpy as np
import pytest

from conftest import OWN_MODELS, SHARED_MODELS
from opensim_reference import OpenSimState, angle_between, link_poses

from mbsim_ros.formats.opensim import load_opensim

pytest.importorskip("opensim", reason="OpenSim's Python package (the ground truth) is not installed")

POSE_TOL = 1e-9        # m and rad: the bound; both sides compose the same transforms in double
ACCEL_REL = 1e-8       # relative to the largest acceleration: two O(n) dynamics algorithms in double


def _models():
    own = sorted((OWN_MODELS / "opensim").glob("*.osim"))
    own = [p for p in own if not p.name.startswith("standin_")]      # our stand-ins differ from OpenSim on purpose
    params = [pytest.param(p, id=p.name) for p in own]
    shared = SHARED_MODELS / "opensim"
    if shared.is_dir():
        params += [pytest.param(p, id="shared/" + p.name) for p in sorted(shared.glob("*.osim"))]
    else:
        params.append(pytest.param(None, id="shared", marks=pytest.mark.skip(
            reason=f"{shared} is absent: the shared model files are not beside this checkout")))
    return params


MODELS = _models()


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # missing bone meshes, duplicate names: reported elsewhere
        return load_opensim(path, visuals="none")


def _dofs(model):
    """[(our DOF index, OpenSim (joint, coordinate) key)] for every DOF of the model."""
    assert model.nq == model.nv, "the loader keeps OpenSim's coordinates: one q per DOF"
    out = []
    for j in model.joints:
        for k, dof in enumerate(j.dof_names or []):
            out.append((j.v_index + k, (j.name, dof.split("/")[-1])))
    return out


def _set_coordinates(o, model, q):
    coords = {o.key(c): c for c in o.coords}
    for i, key in _dofs(model):
        coords[key].setValue(o.state, float(q[i]), False)
    o.model.realizePosition(o.state)


def _compare_poses(o, model, q):
    ours = link_poses(model, q)
    theirs = o.body_poses()
    assert set(theirs) <= set(ours), f"bodies missing from the Model: {set(theirs) - set(ours)}"
    for body, (R, p) in theirs.items():
        T = ours[body]
        assert np.abs(T[:3, 3] - p).max() < POSE_TOL, f"{body}: position {T[:3, 3]} vs OpenSim's {p}"
        assert angle_between(T[:3, :3], R) < POSE_TOL, f"{body}: orientation differs by {angle_between(T[:3, :3], R)} rad"


def _random_q(model, rng):
    """Random coordinates: angles in [-1.2, 1.2] rad, also outside the spline ranges; every
    model here is a tree, so any q is a state."""
    return rng.uniform(-1.2, 1.2, model.nq)


@pytest.mark.parametrize("path", MODELS)
def test_every_body_pose_at_the_default_state_is_opensims(path, tmp_path):
    model = _load(path)
    o = OpenSimState(path, tmp_path)
    o.set_defaults()           # OpenSim's default values, without its assembly
    assert {key for _, key in _dofs(model)} == {o.key(c) for c in o.coords}, "the coordinates differ"
    _compare_poses(o, model, model.initial_q())


@pytest.mark.parametrize("path", MODELS)
def test_every_body_pose_at_random_states_is_opensims(path, tmp_path):
    model = _load(path)
    o = OpenSimState(path, tmp_path)
    rng = np.random.default_rng(11)
    for _ in range(3):
        q = _random_q(model, rng)
        _set_coordinates(o, model, q)
        _compare_poses(o, model, q)


def _opensim_rates(o, model, q, u=None):
    """OpenSim's qdot for our q (by name) and its speeds u (default speeds when None): ours
    is the same number for every coordinate (q-dot; for Ball and Free rotations the Euler
    angle rates, which OpenSim's u are not)."""
    coords = {o.key(c): c for c in o.coords}
    _set_coordinates(o, model, q)
    for i, key in _dofs(model):
        coords[key].setSpeedValue(o.state, coords[key].getDefaultSpeedValue() if u is None else float(u[i]))
    o.model.realizeVelocity(o.state)
    qdot = o.vector(o.state.getQDot())
    return np.array([qdot[o.q_index[key]] for _, key in _dofs(model)])


@pytest.mark.parametrize("path", MODELS)
def test_initial_speeds_are_opensims_default_speeds(path, tmp_path):
    model = _load(path)
    o = OpenSimState(path, tmp_path)
    v0 = model.initial_v()
    theirs = _opensim_rates(o, model, model.initial_q())
    order = [i for i, _ in _dofs(model)]
    np.testing.assert_allclose(v0[order], theirs, rtol=0, atol=1e-12,      # one 3x3 solve per ball joint
                               err_msg="initial speeds differ from OpenSim's default_speed_value")
