"""The `mbsim` command: the main job on the bundled world, info, convert, and bad input."""
import numpy as np

import mbsim_ros as mb
from mbsim_ros import cli


def test_run_simulates_the_bundled_world_and_prints_a_summary(capsys):
    assert cli.main(["run", "--duration", "1", "--quiet", "--transport", "none"]) == 0
    out = capsys.readouterr().out
    assert "simulating SR1, floor: 35 DOF" in out and "contact lcp" in out
    assert "steps: 1000  simulated: 1.000 s" in out
    # the humanoid, joints held, drops the 5 mm between its soles and the floor and stands
    z = float(out.split("final position of WAIST: [")[1].split("]")[0].split()[2])
    assert abs(z - (0.7135 - 0.005)) < 2e-3
    assert int(out.split("final position of WAIST: [")[1].split("; ")[1].split()[0]) >= 8   # both feet flat: 4 corners each
    assert "/SR1/joint_states" in out and "/SR1/WaistAccelSensor" in out      # messages per topic


def test_run_without_contact_falls_freely(capsys):
    assert cli.main(["run", "--duration", "0.1", "--quiet", "--contact", "none", "--transport", "none", "--rtf", "0"]) == 0
    out = capsys.readouterr().out
    z = float(out.split("final position of WAIST: [")[1].split("]")[0].split()[2])
    assert abs(z - (0.7135 - 9.80665 * 1e-6 * 100 * 101 / 2)) < 1e-3


def test_info_lists_tree_sensors_and_mass(capsys):
    assert cli.main(["info", cli.DEFAULT_WORLD[0]]) == 0
    out = capsys.readouterr().out
    assert "SR1: 30 links, 30 joints, nq = 36, nv = 35, total mass 130.8 kg" in out
    for sensor in ("WaistAccelSensor [accelerometer]", "WaistGyro [gyro]", "[force]", "[range]", "[camera]"):
        assert sensor in out


def test_convert_writes_urdf_with_the_same_dynamics(tmp_path, capsys):
    out = tmp_path / "sr1.urdf"
    assert cli.main(["convert", cli.DEFAULT_WORLD[0], "-o", str(out)]) == 0
    wrl = mb.load_model(cli.DEFAULT_WORLD[0])
    urdf = mb.load_model(out, floating_base=True)
    q = wrl.initial_q()
    q[7:] = np.random.default_rng(0).uniform(-1, 1, wrl.nq - 7)
    assert np.allclose(mb.mass_matrix(wrl, q), mb.mass_matrix(urdf, q), rtol=1e-12, atol=1e-12)


def test_bad_input_is_one_line_and_exit_status_2(tmp_path, capsys):
    assert cli.main(["run", str(tmp_path / "missing.wrl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "missing.wrl: no such model file" in err
    bad = tmp_path / "bad.urdf"
    bad.write_text("<robot name='x'><link name='a'/><joint name='j' type='revolute'>")
    assert cli.main(["info", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bad.urdf" in err
    assert cli.main(["run", "--duration", "-1"]) == 2
