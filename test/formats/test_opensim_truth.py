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
    own = [p for p in own if not p.name.startswith("prescribed_")]   # OpenSim prescribes what we leave free
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
        for k, dof in enumerate(j.dof_names or []):   # a ScapulothoracicJoint is two joints here
            out.append((j.v_index + k, (j.params.get("opensim_joint", j.name), dof.split("/")[-1])))
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


def _opensim_accelerations(o, model, q, qdot):
    """OpenSim's q-double-dot (= its udot except for Ball and Free rotations) at our (q, qdot),
    with every force off: OpenSim's u for our q-dot, found through its own qdot."""
    coords = {o.key(c): c for c in o.coords}
    _set_coordinates(o, model, q)
    dofs = _dofs(model)
    # u -> qdot is linear: find the u whose OpenSim qdot is ours
    N = o.rate_matrix([key for _, key in dofs])
    u = np.linalg.solve(N, np.asarray(qdot)[[i for i, _ in dofs]])
    for (_, key), value in zip(dofs, u):
        coords[key].setSpeedValue(o.state, float(value))
    o.model.realizeAcceleration(o.state)
    qdd = o.vector(o.state.getQDotDot())
    return np.array([qdd[o.q_index[key]] for _, key in dofs])


# OpenSim 4.6 gets the velocity-dependent accelerations of a CustomJoint wrong when one
# coordinate turns it about two axes through nonlinear functions (Rajagopal2016's walker
# knees): its udot then disagrees with the equations of motion of its own mass matrix and
# gravity. For these models the moving states are checked against those equations instead.
OPENSIM_CORIOLIS_DEFECT = {"custom_two_spline_rotations.osim", "Rajagopal2016.osim"}
LAGRANGE_REL = 1e-7    # the Lagrangian reference differentiates OpenSim's M(q) numerically (Richardson, h = 1e-3)


def _opensim_lagrange(o, model, q, qdot):
    """q-double-dot from Lagrange's equations with OpenSim's own mass matrix M(q) (calcM) and
    generalized gravity (M udot at rest): M qdd = g - (sum_k dM/dq_k qd_k) qd + 1/2 [qd^T dM/dq_i qd]_i.
    Every DOF here has u = q-dot (no Ball or Free joint)."""
    osim = __import__("opensim")
    dofs = _dofs(model)
    order = [i for i, _ in dofs]
    mat = o.model.getMatterSubsystem()

    def mass_matrix(qq):
        _set_coordinates(o, model, qq)
        M = osim.Matrix()
        mat.calcM(o.state, M)
        idx = [o.u_index[key] for _, key in dofs]
        return np.array([[M.get(a, b) for b in idx] for a in idx])

    def dM(k, h):
        e = np.zeros(model.nv)
        e[order[k]] = h
        return (mass_matrix(q + e) - mass_matrix(q - e)) / (2 * h)

    h = 1e-3
    dMs = [(4 * dM(k, h / 2) - dM(k, h)) / 3 for k in range(len(dofs))]      # Richardson: O(h^4)
    qd = np.asarray(qdot)[order]
    M = mass_matrix(q)
    g = M @ _opensim_accelerations(o, model, q, np.zeros(model.nv))
    Mdot = sum(D * qd[k] for k, D in enumerate(dMs))
    c = Mdot @ qd - 0.5 * np.array([qd @ D @ qd for D in dMs])
    return np.linalg.solve(M, g - c)


def _states(model, seed):
    rng = np.random.default_rng(seed)
    rest = [(model.initial_q(), np.zeros(model.nv))] + [(_random_q(model, rng), np.zeros(model.nv)) for _ in range(2)]
    moving = [(model.initial_q(), model.initial_v())] + [(_random_q(model, rng), rng.uniform(-2, 2, model.nv))
                                                         for _ in range(2)]
    return rest, moving


def _assert_close(model, ours, theirs, rel, what):
    order = [i for i, _ in _dofs(model)]
    scale = max(1.0, np.abs(theirs).max())
    assert np.abs(ours - theirs).max() <= rel * scale, (
        f"{what}: accelerations differ by {np.abs(ours - theirs).max():.3g} (largest {scale:.3g}); by DOF: "
        + ", ".join(f"{model.dof_names[i]} {a:.6g}/{b:.6g}" for i, a, b in zip(order, ours, theirs)
                    if abs(a - b) > rel * scale))


@pytest.mark.parametrize("path", MODELS)
def test_accelerations_at_rest_with_forces_off_are_opensims(path, tmp_path):
    import mbsim_ros as mb
    model = _load(path)
    o = OpenSimState(path, tmp_path)
    order = [i for i, _ in _dofs(model)]
    for q, v in _states(model, 5)[0]:
        ours = mb.forward_dynamics(model, q, v, np.zeros(model.nv))[order]
        _assert_close(model, ours, _opensim_accelerations(o, model, q, v), ACCEL_REL, "at rest")


@pytest.mark.parametrize("path", MODELS)
def test_accelerations_in_motion_with_forces_off_are_opensims(path, tmp_path):
    import mbsim_ros as mb
    model = _load(path)
    o = OpenSimState(path, tmp_path)
    order = [i for i, _ in _dofs(model)]
    opensim_off = 0.0        # how far OpenSim's udot is from its own equations of motion
    for q, v in _states(model, 5)[1]:
        ours = mb.forward_dynamics(model, q, v, np.zeros(model.nv))[order]
        theirs = _opensim_accelerations(o, model, q, v)
        if path.name not in OPENSIM_CORIOLIS_DEFECT:
            _assert_close(model, ours, theirs, ACCEL_REL, "in motion")
            continue
        lagrange = _opensim_lagrange(o, model, q, v)
        _assert_close(model, ours, lagrange, LAGRANGE_REL, "in motion, against OpenSim's own M(q) and gravity")
        opensim_off = max(opensim_off, np.abs(theirs - lagrange).max() / max(1.0, np.abs(lagrange).max()))
    if path.name in OPENSIM_CORIOLIS_DEFECT:
        assert opensim_off > 1e3 * LAGRANGE_REL, (
            "OpenSim's udot now satisfies its own equations of motion: take this model out of "
            "OPENSIM_CORIOLIS_DEFECT and compare with its udot directly")
