"""Initial assembly (issue 19): a Simulation starts every constrained model on its loop
closures, moved least from the file's coordinates, with a note naming the coordinates moved by
more than 1e-6 (OpenSim's initSystem and Chrono assemble so before they run)."""
import math
import pathlib
import warnings

import numpy as np
import pytest

import mbsim_ros as mb
from conftest import shared_model
from mbsim_ros.dynamics.assembly import ASSEMBLY_TOL, loop_residuals

OWN = pathlib.Path(__file__).resolve().parents[1] / "models"
OPENSIM_ASSEMBLY = 1e-9     # OpenSim's assembler stops near its accuracy: it leaves ~1e-10 here


def _simulation(path, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mb.load_model(path)
        return model, mb.Simulation(model, contact="none", **options)


def _residual(sim):
    df, _ = sim.compiled.new_data()
    return np.abs(loop_residuals(sim.compiled, sim.constraints, df, sim.q)[1]).max()


def test_bouncing_block_starts_where_opensims_init_system_assembles_it():
    pytest.importorskip("opensim", reason="OpenSim's Python package (the ground truth) is not installed")
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "formats"))
    from opensim_reference import opensim
    path = shared_model("opensim", "bouncing_block.osim")
    model, sim = _simulation(path)
    osim = opensim()
    m = osim.Model(str(path))
    state = m.initSystem()
    coords = {c.getName(): c for c in (m.getCoordinateSet().get(k) for k in range(m.getCoordinateSet().getSize()))}
    theirs = np.array([coords[n.split("/")[-1]].getValue(state) for n in model.dof_names])
    defaults = np.array([coords[n.split("/")[-1]].getDefaultValue() for n in model.dof_names])
    # the point-on-line constraints move the block 2.8e-4 m back onto the y axis
    assert abs(defaults - theirs).max() > 2.7e-4
    np.testing.assert_allclose(sim.q, theirs, rtol=0, atol=OPENSIM_ASSEMBLY)
    assert _residual(sim) <= ASSEMBLY_TOL
    assert sim.notes == ["initial assembly onto the loop closures (to 1e-10) moved xTranslation by -0.000278"]
    sim.step(5)
    sim.reset()                  # reset returns to the assembled state
    np.testing.assert_array_equal(sim.q, sim._initial_q)


def test_chrono_revolute_spherical_written_off_its_plane_is_assembled():
    model, sim = _simulation(OWN / "chrono_yaml" / "revolute_spherical_offset.yaml")
    # closed form: the wheel turns the point (0.5, 0.001) onto y = 0; the slider keeps the rod
    theta = -math.atan2(0.001, 0.5)
    slide = math.hypot(0.5, 0.001) + math.hypot(1.0, 0.001) - 1.5
    q = dict(zip(model.dof_names, sim.q))
    assert q["axle"] == pytest.approx(theta, abs=1e-12)
    assert q["rail"] == pytest.approx(slide, abs=1e-12)
    assert _residual(sim) <= ASSEMBLY_TOL
    (note,) = sim.notes
    assert note.startswith("initial assembly onto the loop closures (to 1e-10) moved axle by -0.002, rail by ")


def test_least_displacement_and_locked_coordinates_held():
    """Two ways onto a loop: the assembly takes the shortest (the projection of the initial q
    onto the constraint manifold: the displacement is normal to it, J's row space), and a
    locked coordinate never moves."""
    model = mb.load_model(OWN / "chrono_yaml" / "revolute_spherical_offset.yaml")
    joint = model.joint("axle")
    joint.q0 = np.array([0.1])           # the wheel turned off the plane by 0.05 m
    model.finalize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = mb.Simulation(model, contact="none")
    df, _ = sim.compiled.new_data()
    J, e = loop_residuals(sim.compiled, sim.constraints, df, sim.q)
    assert np.abs(e).max() <= ASSEMBLY_TOL
    d = sim.q - model.initial_q()
    # d is in J's row space: its part in J's null space vanishes
    null = np.eye(model.nv) - np.linalg.pinv(J) @ J
    assert np.abs(null @ d).max() <= 1e-9
    joint.locked = True
    model.finalize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim = mb.Simulation(model, contact="none")
    assert sim.q[joint.v_index] == 0.1
    assert any("could not all be met" in str(w.message) for w in caught)


def test_a_run_logs_the_assembly_note_once():
    """mbsim run and the node build their Simulation through run.simulation: the
    assembly note reaches its log once, not also as a Python warning."""
    from mbsim_ros.run.config import load_config
    from mbsim_ros.run import build_simulation
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mb.load_model(OWN / "chrono_yaml" / "revolute_spherical_offset.yaml")
    logged = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_simulation([model], load_config(None, dict(contact="none")), log=logged.append)
    assert len(logged) == 1 and logged[0].startswith("initial assembly onto the loop closures")
    assert not [w for w in caught if "initial assembly" in str(w.message)]
