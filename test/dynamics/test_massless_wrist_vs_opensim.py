"""OpenSim's wrist construct (opensim-models' wrist.osim): the hand hangs on massless auxiliary
bodies whose coordinates CoordinateCouplerConstraints tie to `flexion` and `deviation`, the
coordinates of a massless body that only the couplers move. We simulate it as it is; OpenSim 4.6
cannot (NaN: its articulated-body pass divides by that body's zero inertia), so the ground truth
is OpenSim with a mass EPS = 1e-6 kg there, which moves its answer by ~0.5 EPS rad (measured: EPS
1e-4 and 1e-2 give 5.2e-5 and 5.2e-3 rad over this run).

Our semi-implicit Euler step is first order: the difference from OpenSim (RungeKuttaMerson at
accuracy 1e-9) over 0.2 s must stay below 1.5 rad/s x dt (measured 1.27 rad/s x dt: 1.26e-4 rad at
dt 1e-4) and halve when dt halves (a modelling difference, such as a missing coupler torque,
would not shrink with dt). The
regularization M + rho J^T J changes nothing here: its term rho J^T J (v+ - v) is absorbed into
the coupler rows' multipliers, exact when the rows hold; what remains is the rows' cfm (1e-5 of
each step's coupler impulse), checked against cfm 0. bench/wrist_vs_opensim.py runs the real
wrist.osim the same way (docs/dynamics.md)."""
import pathlib
import warnings

import numpy as np
import pytest

import mbsim_ros as mb

osim = pytest.importorskip("opensim", reason="OpenSim's Python package (the ground truth) is not installed")

MODEL = pathlib.Path(__file__).parents[1] / "models" / "opensim_constrained" / "wrist_chain.osim"
TIMES = np.linspace(0.0, 0.2, 11)[1:]
EPS = 1e-6


def _write(tmp_path, mass):
    path = tmp_path / f"wrist_chain_{mass:g}.osim"
    text = MODEL.read_text().replace("IMAGINE_MASS", repr(mass)).replace("IMAGINE_INERTIA", repr(mass * 1e-4))
    path.write_text(text)
    return path


def _opensim(path):
    model = osim.Model(str(path))
    state = model.initSystem()
    model.realizeVelocity(state)     # the file's default speeds satisfy the couplers
    assert np.abs(state.getUErr().to_numpy()).max() < 1e-12
    coords = model.getCoordinateSet()
    names = [coords.get(i).getName() for i in range(coords.getSize())]
    manager = osim.Manager(model)
    manager.setIntegratorAccuracy(1e-9)
    state.setTime(0.0)
    manager.initialize(state)
    out = []
    for t in TIMES:
        state = manager.integrate(t)
        out.append([coords.get(n).getValue(state) for n in names])
    return names, np.array(out)




def _run(path, names, dt, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mb.load_model(path)
        sim = mb.Simulation(model, dt=dt, contact="none", **options)
    index = [model.dof_names.index(n) for n in names]
    out = []
    for t in TIMES:
        sim.step(int(round((t - sim.t) / dt)))
        out.append(sim.q[index].copy())
    return np.array(out), sim.notes


@pytest.fixture(scope="module")
def opensim_truth(tmp_path_factory):
    return _opensim(_write(tmp_path_factory.mktemp("wrist"), EPS))


def test_the_massless_wrist_body_moves_as_opensim_says_within_the_first_order_step_error(opensim_truth, tmp_path):
    names, theirs = opensim_truth
    path = _write(tmp_path, 0.0)
    coarse, notes = _run(path, names, 2e-4)
    fine, _ = _run(path, names, 1e-4)
    assert any("Wrist moves only massless links that constraints determine" in n for n in notes), notes
    e_coarse, e_fine = np.abs(coarse - theirs).max(), np.abs(fine - theirs).max()
    assert e_fine < 1.5 * 1e-4, (e_fine, names)
    assert 1.8 < e_coarse / e_fine < 2.2, (e_coarse, e_fine)
    # the couplers hold: the auxiliary coordinates follow flexion and deviation
    q = dict(zip(names, fine[-1]))
    assert q["prox_r3"] == pytest.approx(0.5 * q["flexion"], abs=1e-6)
    assert q["dist_r3"] == pytest.approx(0.5 * q["flexion"], abs=1e-6)
    assert q["dev_r1"] == pytest.approx(0.5 * q["deviation"], abs=1e-6)


def test_the_regularization_leaves_the_constrained_answer_unchanged(opensim_truth, tmp_path):
    names, _ = opensim_truth
    path = _write(tmp_path, 0.0)
    default, _ = _run(path, names, 2e-4)
    exact, _ = _run(path, names, 2e-4, cfm=0.0)
    # cfm 1e-5 of a per-step impulse over 1000 steps: far below the 2.5e-4 rad step error
    assert np.abs(default - exact).max() < 1e-8
