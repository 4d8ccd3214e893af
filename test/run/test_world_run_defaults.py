"""An SDFormat world's <physics> and <gravity> as a run's defaults (issue 38): its
real_time_factor and max_step_size fill what the user leaves open (no --rtf, no YAML key, the
node's parameter left at its default); a value the user gives wins, 1 included; a world without
<physics> runs at 1. Models whose files state no gravity (URDF, the ground plane, MJCF without
<option gravity>) take the world's. Through load_world, compile_models and the command line's
and the node's own configuration paths; nothing is simulated."""
import pytest

from mbsim_ros import ModelError, cli
from mbsim_ros.dynamics.compiled import compile_models
from mbsim_ros.ros.parameters import PARAMETER_DEFAULTS, config_from_parameters
from mbsim_ros.run.config import load_config
from mbsim_ros.run.world import load_world

BOX = """<model name="box"><link name="body"><inertial><mass>1</mass></inertial>
  <collision name="c"><geometry><box><size>0.1 0.1 0.1</size></box></geometry></collision></link></model>"""


def world(tmp_path, physics):
    path = tmp_path / "w.sdf"
    path.write_text(f'<sdf version="1.9"><world name="w">{physics}{BOX}</world></sdf>')
    return str(path)


def rtf_world(tmp_path, rtf=2):
    return world(tmp_path, f'<physics name="p" type="ode"><max_step_size>0.002</max_step_size>'
                           f'<real_time_factor>{rtf}</real_time_factor></physics>')


def resolved(config):
    _, notes = load_world(config)
    return config, notes


def test_the_worlds_real_time_factor_when_the_user_gives_none(tmp_path):
    config, notes = resolved(load_config(None, {"model": rtf_world(tmp_path)}))
    assert (config.real_time_factor, config.dt, config.paced) == (2.0, 0.002, True)
    assert "real_time_factor 2.0: model w's real_time_factor" in notes


@pytest.mark.parametrize("given", [0.5, 1.0, 0.0])
def test_a_real_time_factor_the_user_gives_wins(tmp_path, given):
    path = rtf_world(tmp_path)
    yaml_file = tmp_path / "sim.yaml"
    yaml_file.write_text(f"model: {path}\nreal_time_factor: {given}\n")
    configs = [load_config(None, {"model": path, "real_time_factor": given}), load_config(yaml_file)]   # --rtf, YAML
    if given != PARAMETER_DEFAULTS["real_time_factor"]:     # the node cannot tell 1.0 set from its default
        configs.append(config_from_parameters(dict(PARAMETER_DEFAULTS, model=path, real_time_factor=given), "/"))
    for config in configs:
        config, notes = resolved(config)
        assert config.real_time_factor == given and config.paced == (given > 0)
        assert f"real_time_factor {given} as given (model w's real_time_factor 2.0 not used)" in notes


def test_the_node_parameter_left_at_its_default_leaves_the_world_its_say(tmp_path):
    config = config_from_parameters(dict(PARAMETER_DEFAULTS, model=rtf_world(tmp_path)), "/")
    assert resolved(config)[0].real_time_factor == 2.0


def test_mbsim_run_takes_the_worlds_or_the_given_rtf(tmp_path, monkeypatch):
    """The command line's own path (cmd_run) up to the run: --rtf or the world's."""
    seen = []

    def run(args, config, view):
        load_world(config)
        seen.append(config.real_time_factor)
        return 0
    monkeypatch.setattr(cli, "_run", run)
    path = rtf_world(tmp_path, 3)
    assert cli.main(["run", path]) == 0
    assert cli.main(["run", path, "--rtf", "1"]) == 0
    assert seen == [3.0, 1.0]


def test_no_physics_runs_at_one(tmp_path):
    config, notes = resolved(load_config(None, {"model": world(tmp_path, "")}))
    assert (config.real_time_factor, config.paced) == (1.0, True)
    assert not any("real_time_factor" in n for n in notes)
    # <physics> without <real_time_factor>: SDFormat's default, 1
    config, _ = resolved(load_config(None, {"model": world(tmp_path, "<physics name='p'/>")}))
    assert config.real_time_factor == 1.0


@pytest.mark.parametrize("rtf", [0, -1])
def test_a_world_at_zero_or_below_runs_as_fast_as_possible(tmp_path, rtf):
    """gz-sim paces no step at a real_time_factor below 1e-9: our 0 (a note for a negative one)."""
    config, notes = resolved(load_config(None, {"model": rtf_world(tmp_path, rtf)}))
    assert (config.real_time_factor, config.paced) == (0.0, False)
    assert (rtf < 0) == any("real_time_factor -1: 0, as fast as possible" in n for n in notes), notes


def test_left_open_is_paced_at_one_until_filled_in():
    config = load_config()
    assert config.real_time_factor is None and config.paced and config.target_rtf == 1.0


URDF = """<robot name="crate"><link name="base"><inertial><mass value="1"/><origin xyz="0 0 0"/>
  <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link></robot>"""


def mjcf(option=""):
    return (f'<mujoco model="pendulum">{option}<worldbody><body name="bob" pos="0 0 1">'
            '<joint name="swing" type="hinge" axis="0 1 0"/><geom type="sphere" size="0.05" mass="1"/>'
            '</body></worldbody></mujoco>')


@pytest.mark.parametrize("order", ["world first", "robot first"])
def test_models_stating_no_gravity_take_the_worlds(tmp_path, order):
    """A URDF robot beside an SDFormat world falls in the world's 9.8 (SDFormat's default), as
    Gazebo puts it there, whichever comes first; so does an MJCF file without <option gravity>."""
    (tmp_path / "crate.urdf").write_text(URDF)
    (tmp_path / "pendulum.xml").write_text(mjcf())
    files = [rtf_world(tmp_path), str(tmp_path / "crate.urdf"), str(tmp_path / "pendulum.xml")]
    models, _ = load_world(load_config(None, {"model": ",".join(files if order == "world first" else files[::-1])}))
    compiled = compile_models(list(models))
    assert compiled.tree.gravity.tolist() == [0, 0, -9.8]
    assert len(models) >= 3 and all(m.gravity.tolist() == [0, 0, -9.8] for m in models)    # a ground plane too


def test_two_stated_gravities_that_differ_are_refused(tmp_path):
    (tmp_path / "pendulum.xml").write_text(mjcf('<option gravity="0 0 -9.81"/>'))
    models, _ = load_world(load_config(None, {"model": f"{rtf_world(tmp_path)},{tmp_path / 'pendulum.xml'}"}))
    with pytest.raises(ModelError, match="different gravity"):
        compile_models(list(models))
