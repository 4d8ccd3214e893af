"""Massless moving bodies from the run configuration, `mbsim run --massless-armature` and the
sim_node's massless_armature parameter (issue 19): by default the massless fingers get a
bounded mass and the run says so; with --no-bound-massless a run ends in one line naming the
joints and how to opt in; with the armature the model runs, the armature on exactly those joints
(test/dynamics/test_massless.py checks the dynamics of both). The gripper is an arm: welded
with --fixed-base (its file has no link named world)."""
from pathlib import Path

from mbsim_ros.cli import main
from mbsim_ros.run.config import DEFAULTS, load_config
from mbsim_ros.ros.parameters import PARAMETER_DEFAULTS, PARAMETERS, config_from_parameters
from mbsim_ros.run import build_simulation
from mbsim_ros.run.world import load_world

GRIPPER = Path(__file__).resolve().parents[1] / "models" / "urdf" / "massless_gripper.urdf"
RUN = ["run", str(GRIPPER), "--fixed-base", "--transport", "none", "--rtf", "0", "--duration", "0.05", "--quiet"]
NOTE = "joints finger_left_joint, finger_right_joint move only massless links: armature 0.01 on their DOFs"


def test_by_default_the_fingers_get_a_bounded_mass_and_the_run_says_so(capsys):
    assert main(RUN) == 0
    out, err = capsys.readouterr()
    assert "steps: 50 " in out
    assert "warning: joints finger_left_joint, finger_right_joint move only links without mass: they get 1% " \
           "of palm's mass and inertia" in err


def test_without_bounded_masses_a_run_ends_in_one_line_naming_the_joints_and_the_option(capsys):
    assert main(RUN + ["--no-bound-massless"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("mbsim: Simulation of massless_gripper: joints 'finger_left_joint', "
                             "'finger_right_joint' move only links with no mass")
    assert "mbsim run --massless-armature" in err[0] and "run configuration key" in err[0]


def test_massless_armature_option_runs_the_model(capsys):
    assert main(RUN + ["--massless-armature", "0.01"]) == 0
    out, err = capsys.readouterr()
    assert "steps: 50 " in out
    assert f"warning: {NOTE}" in err


def test_massless_armature_config_key_runs_the_model_and_refuses_a_negative(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("massless_armature: 0.01\n")
    assert main(RUN + ["--config", str(cfg)]) == 0
    assert NOTE in capsys.readouterr().err
    assert main(RUN + ["--massless-armature", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "massless_armature must be a finite number >= 0" in err[0], err


def test_node_parameter_reaches_the_simulation(tmp_path):
    default, bounds, runtime, text = PARAMETERS["massless_armature"]
    assert default == DEFAULTS["massless_armature"] == 0.0 and bounds == (0.0, 1e6)
    assert not runtime and "massless" in text               # read at start only: declared read-only
    values = dict(PARAMETER_DEFAULTS, model=str(GRIPPER), massless_armature=0.01)
    config = config_from_parameters(values, "/")
    assert config.massless_armature == 0.01
    config.floating_base = False
    models, _ = load_world(config)
    sim = build_simulation(models, config)
    assert NOTE in sim.notes[0]
    assert sim.compiled.tree.armature.tolist() == [0.0, 0.0, 0.01, 0.01]
    # left at its default the parameter does not override the config file's value
    cfg = tmp_path / "c.yaml"
    cfg.write_text("massless_armature: 0.02\n")
    config = config_from_parameters(dict(PARAMETER_DEFAULTS, config=str(cfg)), "/")
    assert config.massless_armature == 0.02
    assert load_config(None).massless_armature == 0.0
