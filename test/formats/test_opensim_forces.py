"""OpenSim's passive forces read from .osim files act as in OpenSim: at random states (moving,
so dampers count) each CoordinateLimitForce, BushingForce, PointToPointSpring and
SpringGeneralizedForce gives the generalized force OpenSim computes for it. This checks the
loader's units (degrees), frames (3.x bushing locations included) and sign conventions."""
import copy
import warnings

import numpy as np
import pytest

from conftest import OWN_MODELS, SHARED_MODELS
from opensim_reference import OpenSimState

from mbsim_ros.dynamics import Physics
from mbsim_ros.formats.opensim import load_opensim

osim = pytest.importorskip("opensim", reason="OpenSim's Python package (the ground truth) is not installed")

REL = 1e-9     # relative to the largest generalized force: a few products and one 3x3 solve per side
KINDS = ("CoordinateLimitForce", "BushingForce", "PointToPointSpring", "SpringGeneralizedForce")


def _models():
    params = [pytest.param(OWN_MODELS / "opensim" / n, id=n) for n in ("features40.osim", "features30.osim")]
    shared = SHARED_MODELS / "opensim"
    if shared.is_dir():
        params += [pytest.param(shared / n, id="shared/" + n) for n in (
            "bouncing_block.osim", "bouncing_block_30000.osim", "WalkerModel.osim", "subject01_adjusted_spring.osim")]
    else:
        params.append(pytest.param(None, id="shared", marks=pytest.mark.skip(
            reason=f"{shared} is absent: the shared model files are not beside this checkout")))
    return params


def _dofs(model):
    return [(j.v_index + k, (j.name, dof.split("/")[-1])) for j in model.joints for k, dof in enumerate(j.dof_names or [])]


def _opensim_force(o, model, name, q, v):
    """OpenSim's generalized force of force `name` at (q, our q-dot v), gravity off: M times
    the change of udot when it is switched on, mapped to our coordinates (tau_q = N^-T tau_u)."""
    m, s = o.model, o.state
    coords = {o.key(c): c for c in o.coords}
    dofs = _dofs(model)
    keys = [key for _, key in dofs]
    for i, key in dofs:
        coords[key].setValue(s, float(q[i]), False)
    N = o.rate_matrix(keys)
    u = np.linalg.solve(N, np.asarray(v)[[i for i, _ in dofs]])
    for key, value in zip(keys, u):
        coords[key].setSpeedValue(s, float(value))
    udots = []
    for on in (False, True):
        for f in list(m.getForceSet()):
            f.setAppliesForce(s, on and f.getName() == name)
        m.realizeAcceleration(s)
        udots.append(o.vector(s.getUDot()))
    M = osim.Matrix()
    m.getMatterSubsystem().calcM(s, M)
    idx = [o.u_index[key] for key in keys]
    Mu = np.array([[M.get(a, b) for b in range(M.ncol())] for a in range(M.nrow())])
    return np.linalg.solve(N.T, (Mu @ (udots[1] - udots[0]))[idx])


@pytest.mark.parametrize("path", _models())
def test_each_passive_force_gives_opensims_generalized_force(path, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = load_opensim(path, visuals="none")
    o = OpenSimState(path, tmp_path, gravity=False)
    for c in o.model.getConstraintSet():
        c.setIsEnforced(o.state, False)
    names = [f.getName() for f in list(o.model.getForceSet()) if f.getConcreteClassName() in KINDS
             and f.get_appliesForce()]
    assert names, "a model with passive forces"
    order = [i for i, _ in _dofs(full)]
    rng = np.random.default_rng(17)
    # wide enough that every coordinate limit is crossed in some states and not in others
    states = [(rng.uniform(-3, 3, full.nq), rng.uniform(-2, 2, full.nv)) for _ in range(8)]
    for name in names:
        model = copy.deepcopy(full)
        model.actuators.clear()
        model.forces[:] = [f for f in model.forces if f.name == name]
        model.finalize()
        sim = Physics(model, contact="none")
        largest = 0.0
        for q, v in states:
            theirs = _opensim_force(o, model, name, q, v)
            if model.forces:
                sim.q, sim.v = q, v
                ours = sim.applied_forces()
            else:                    # a SpringGeneralizedForce: read into its joint's spring and damper
                ours = np.zeros(model.nv)
                for j in model.joints:
                    qj, vj = q[j.q_index:j.q_index + j.nq], v[j.v_index:j.v_index + j.nv]
                    ours[j.v_index:j.v_index + j.nv] = -j.stiffness * (qj - j.rest_position) - j.damping * vj
            scale = np.abs(theirs).max()
            largest = max(largest, scale)
            np.testing.assert_allclose(ours[order], theirs, rtol=0, atol=REL * max(scale, 1.0),
                                       err_msg=f"{name}: generalized forces by DOF {[model.dof_names[i] for i in order]}")
        assert largest > 1e-3, f"{name} should act in some of these states"
