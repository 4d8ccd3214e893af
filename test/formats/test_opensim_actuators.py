"""OpenSim's actuators read from .osim files produce, at excitation 1, the generalized forces
OpenSim computes for them: PointActuator (point and direction in the body or the ground),
TorqueActuator (bodyA and bodyB as OpenSim orders them, axis in bodyA or the ground) and
CoordinateActuator (on a Ball or Free rotation: OpenSim's mobility force on the angular
velocity it drives)."""
import warnings

import numpy as np
import pytest

from conftest import OWN_MODELS, SHARED_MODELS
from opensim_reference import OpenSimState

from mbsim_ros.dynamics import Physics
from mbsim_ros.formats.opensim import load_opensim

osim = pytest.importorskip("opensim", reason="OpenSim's Python package (the ground truth) is not installed")

REL = 1e-10     # a generalized force is one Jacobian-transpose product in double on each side


def _models():
    own = [OWN_MODELS / "opensim" / n for n in ("features40.osim", "features30.osim")]
    params = [pytest.param(p, id=p.name) for p in own]
    shared = SHARED_MODELS / "opensim"
    if shared.is_dir():
        params += [pytest.param(shared / n, id="shared/" + n) for n in (
            "point-actuator.osim", "torque-actuator.osim", "subject01_adjusted_spring.osim", "newton_cradle.osim",
            "double_pendulum33.osim")]
    else:
        params.append(pytest.param(None, id="shared", marks=pytest.mark.skip(
            reason=f"{shared} is absent: the shared model files are not beside this checkout")))
    return params


def _dofs(model):
    return [(j.v_index + k, (j.name, dof.split("/")[-1])) for j in model.joints for k, dof in enumerate(j.dof_names or [])]


def _opensim_generalized_force(o, model, name, q):
    """OpenSim's generalized force of actuator `name` at control 1, zero speed, no gravity and
    every other force off, in our coordinates: M udot in OpenSim's u, mapped through its
    q-dot = N u (tau_q = N^-T tau_u; N is the identity but for Ball and Free rotations)."""
    m, s = o.model, o.state
    coords = {o.key(c): c for c in o.coords}
    dofs = _dofs(model)
    for i, key in dofs:
        coords[key].setValue(s, float(q[i]), False)
    forces = m.getForceSet()
    for k in range(forces.getSize()):
        forces.get(k).setAppliesForce(s, forces.get(k).getName() == name)
    N = o.rate_matrix([key for _, key in dofs])
    m.realizeVelocity(s)
    actuators = m.getActuators()
    controls = m.getControls(s)
    for k in range(actuators.getSize()):
        controls.set(k, 1.0 if actuators.get(k).getName() == name else 0.0)
    m.setControls(s, controls)
    m.realizeAcceleration(s)
    udot = o.vector(s.getUDot())
    M = osim.Matrix()
    m.getMatterSubsystem().calcM(s, M)
    idx = [o.u_index[key] for _, key in dofs]
    tau_u = np.array([[M.get(a, b) for b in range(M.ncol())] for a in range(M.nrow())]) @ udot
    return np.linalg.solve(N.T, tau_u[idx])


@pytest.mark.parametrize("path", _models())
def test_each_actuator_at_excitation_one_gives_opensims_generalized_force(path, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = load_opensim(path, visuals="none")
    model.forces.clear()                 # each actuator alone
    model.finalize()
    assert model.actuators, "a model with actuators"
    sim = Physics(model, contact="none")
    o = OpenSimState(path, tmp_path, gravity=False, controllers=False)
    for c in o.model.getConstraintSet():
        c.setIsEnforced(o.state, False)
    order = [i for i, _ in _dofs(model)]
    rng = np.random.default_rng(3)
    for q in (model.initial_q(), rng.uniform(-1.2, 1.2, model.nq), rng.uniform(-1.2, 1.2, model.nq)):
        sim.q = q
        sim.v = np.zeros(model.nv)
        for name in sim.actuator_names:
            sim.controls = np.zeros(len(sim.actuator_names))
            sim.set_control(name, 1.0)
            ours = sim.applied_forces()[order]
            theirs = _opensim_generalized_force(o, model, name, q)
            scale = np.abs(theirs).max()
            assert scale > 1e-3, f"{name} should push something"
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=REL * scale,
                                       err_msg=f"{name}: generalized forces by DOF {[model.dof_names[i] for i in order]}")
