"""The `mbsim` command: the main job on the bundled world, info, convert, and bad input."""
import time

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


def _run_with_a_stall(capsys, monkeypatch, seconds=0.1, at=0.1, rtf=2, config=()):
    """mbsim run of 5000 steps at `rtf` whose physics thread stalls once, `at` s into the run:
    the summary's lateness (mean/p50/p99/max in ms) and the whole summary line. config: more
    arguments (--config FILE)."""
    from mbsim_ros.ros import bridge
    on_step = bridge.Bridge.on_step

    def stalling(self, sim):
        if abs(sim.t - at) < 0.5 * sim.dt:
            time.sleep(seconds)
        on_step(self, sim)
    monkeypatch.setattr(bridge.Bridge, "on_step", stalling)
    assert cli.main(["run", "--duration", "5", "--rtf", str(rtf), "--quiet", "--transport", "none", *config]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("steps: 5000"))
    return [float(x) for x in line.split("lateness mean/p50/p99/max: ")[1].split()[0].split("/")], line


def test_the_run_summary_gives_the_lateness_of_every_step(capsys, monkeypatch):
    """A stall in the run's first 5 % shows in the summary's maximum (a window of the last 4096
    steps, as /diagnostics keeps live, would have lost it), and the overruns agree with it."""
    (mean, p50, p99, worst), line = _run_with_a_stall(capsys, monkeypatch)
    assert worst > 90.0, line              # the step after the 100 ms stall
    assert "of the last" not in line
    assert int(line.split("overruns: ")[1].split()[0]) >= 1


def test_a_run_longer_than_the_summary_window_says_which_steps_its_lateness_covers(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(cli, "_SUMMARY_STEPS", 1000)
    # conservative catch-up: a step's lateness is its own, not the debt of the stall, which a
    # machine too busy to run faster than real time would otherwise carry to the end of the run
    config = tmp_path / "sim.yaml"
    config.write_text("catch_up: conservative\n")
    (mean, p50, p99, worst), line = _run_with_a_stall(capsys, monkeypatch, rtf=1, config=("--config", str(config)))
    assert "(of the last 1000 steps)" in line
    assert worst < 90.0, line              # the 100 ms stall, 4.9 simulated s before the end, is out of it


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
    capsys.readouterr()
    # more steps than a count holds (the fuzz's --duration 1e308 overflowed int())
    assert cli.main(["run", "--duration", "1e308", "--rtf", "0", "--transport", "none", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "duration 1e+308 s at dt = 0.001 s is more than 1e+15 steps" in err


# -- the first hour (issue 19): every bad input is one line on stderr and exit status 2 ----------
import os                                                     # noqa: E402
import pathlib                                                # noqa: E402
import struct                                                 # noqa: E402
import subprocess                                             # noqa: E402
import sys                                                    # noqa: E402

import pytest                                                 # noqa: E402

from conftest import OWN_MODELS, shared_model, subprocess_env  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
ARM = str(REPO / "mbsim_ros" / "data" / "models" / "two_link_arm.osim")


def cli_status(argv, capsys):
    """(exit status, stdout, stderr lines) of `mbsim argv` run in this process; argparse's exits
    are statuses too. An exception escaping main (a traceback) fails the test by itself."""
    try:
        status = cli.main([str(a) for a in argv])
    except SystemExit as e:
        status = e.code
    out, err = capsys.readouterr()
    return status, out, [line for line in err.splitlines() if line.strip()]


def assert_one_line(argv, capsys, *expected):
    status, out, err = cli_status(argv, capsys)
    assert status == 2, (status, out, err)
    assert len(err) == 1, err
    assert "Traceback" not in err[0] and err[0].startswith("mbsim")
    for text in expected:
        assert text in err[0], err[0]
    assert "wrote" not in out and "simulating" not in out
    return err[0]


@pytest.fixture
def not_a_bag(tmp_path):
    folder = tmp_path / "not_a_bag"
    folder.mkdir()
    (folder / "notes.txt").write_text("a folder, not a rosbag2 bag\n")
    return folder


@pytest.mark.parametrize("argv, expected", [
    # tracebacks before
    (["run", "--integrator", "rk4", "--transport", "none", "--quiet", "--duration", "0.01"],
     ["rk4", "LCP contact", "penalty"]),
    (["render", "--width", "100000", "--height", "100000", "-o", "{tmp}/x.png"], ["--width 100000", "16384"]),
    # accepted silently before
    (["run", "--dt", "10", "--transport", "none"], ["duration of 5 s", "one step of dt = 10 s"]),
    (["run", "--duration", "0.0001", "--transport", "none"], ["duration of 0.0001 s", "dt = 0.001 s"]),
    (["render", "--width", "0", "-o", "{tmp}/x.png"], ["--width 0"]),
    (["render", "--height", "0", "-o", "{tmp}/x.png"], ["--height 0"]),
    (["render", "--fov", "0", "-o", "{tmp}/x.png"], ["--fov 0", "between 1e-06 and pi"]),
    (["render", "--fov", "3.5", "-o", "{tmp}/x.png"], ["--fov 3.5"]),
    (["render", "-o", "{tmp}/x.bmp"], ["x.bmp", ".png, .jpg"]),
    (["render", "-o", "{tmp}/x.png", "--depth", "{tmp}/d.tiff"], ["--depth", "d.tiff"]),
    (["run", "--namespace", "bad name!", "--transport", "none"], ["'bad name!'", "not a ROS name"]),
    (["run", "--namespace", "1robot", "--transport", "none"], ["'1robot'", "not a ROS name"]),
    (["run", "{tmp}", "--transport", "none"], ["a directory, not a model file", ".osim"]),
    (["info", "{tmp}"], ["a directory, not a model file"]),
    (["convert", ARM, "-o", "{tmp}/no/such/arm.urdf"], ["no such folder", "no/such"]),
    # argparse's own errors, one line too
    (["run", "--dt", "fast"], ["--dt", "invalid float value"]),
    (["render"], ["-o/--output"]),
    (["frobnicate"], ["invalid choice"]),
])
def test_bad_input_is_one_line_on_stderr_and_status_2(argv, expected, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert_one_line(argv, capsys, *expected)
    assert not any(p.suffix in (".png", ".jpg", ".bmp", ".tiff") for p in tmp_path.iterdir())


def test_plot_of_a_folder_that_is_not_a_bag_is_one_line(not_a_bag, tmp_path, capsys):
    assert_one_line(["plot", not_a_bag, "-o", tmp_path / "x.png"], capsys, str(not_a_bag),
                    "not a readable rosbag2 bag", "metadata.yaml")
    assert_one_line(["plot", tmp_path / "missing", "-o", tmp_path / "x.png"], capsys, "no such bag")
    assert_one_line(["plot", not_a_bag, "-o", tmp_path / "x.txt"], capsys, "x.txt", ".png")
    assert not (tmp_path / "x.png").exists()


def test_render_refuses_a_size_the_memory_cannot_hold(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "_available_memory", lambda: 10_000_000)        # 10 MB free
    assert_one_line(["render", "--width", "1000", "--height", "1000", "-o", tmp_path / "x.png"], capsys,
                    "1000x1000", "0.04 GB", "0.01 GB")


@pytest.mark.parametrize("argv, expected", [
    (["plot", "{tmp}", "-o", "{tmp}/x.png"], "not a readable rosbag2 bag"),
    (["render", "--width", "100000", "--height", "100000", "-o", "{tmp}/x.png"], "--width 100000"),
])
def test_the_mbsim_process_itself_ends_with_one_line_and_status_2(argv, expected, tmp_path):
    """The same through the console entry point in a fresh process: no traceback reaches stderr."""
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    env = subprocess_env()      # as the session began, before `import opensim` rewrote LD_LIBRARY_PATH
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-m", "mbsim_ros.cli", *argv], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and expected in p.stderr and "Traceback" not in p.stderr


def test_run_help_lists_every_model_format(capsys):
    status, out, _ = cli_status(["run", "--help"], capsys)
    assert status == 0
    for ext in (".wrl", ".urdf", ".osim", ".yaml"):
        assert ext in out
    assert "--z-up" in out


def _missing_mesh_urdf(tmp_path, extra_box=False):
    box = "<visual><geometry><box size='0.1 0.1 0.1'/></geometry></visual>" if extra_box else ""
    path = tmp_path / "ghost.urdf"
    path.write_text(f"""<robot name="ghost">
  <link name="base"><visual><geometry><mesh filename="meshes/base_missing.stl"/></geometry></visual>{box}</link>
  <link name="arm"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><geometry><mesh filename="meshes/arm_missing.dae"/></geometry></visual></link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>""")
    return path


def test_info_prints_each_loader_note_once(tmp_path, capsys):
    status, out, err = cli_status(["info", _missing_mesh_urdf(tmp_path)], capsys)
    assert status == 0 and not err
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert len(notes) == 3 and len(set(notes)) == 3
    assert notes[0] == "note: ghost: root link base floats (no link named world welds it: the URDF convention, " \
                       "as in Gazebo); --fixed-base (floating_base: false) welds it"
    assert sum("base_missing.stl" in n for n in notes) == 1 and sum("arm_missing.dae" in n for n in notes) == 1


def test_render_warns_when_the_meshes_are_missing(tmp_path, capsys):
    status, out, err = cli_status(["render", _missing_mesh_urdf(tmp_path), "-o", tmp_path / "ghost.png"], capsys)
    assert status == 0 and "wrote" in out
    warning = [line for line in err if line.startswith("warning:")]
    assert len(warning) == 1
    assert "ghost: nothing of it drawn" in warning[0]
    assert "base_missing.stl" in warning[0] and "arm_missing.dae" in warning[0]
    status, out, err = cli_status(["render", _missing_mesh_urdf(tmp_path, extra_box=True), "-o",
                                   tmp_path / "ghost.png"], capsys)
    assert [line for line in err if line.startswith("warning:")] == [
        "warning: ghost: 2 of its 3 shapes not drawn: a mesh file missing or unreadable "
        "(base_missing.stl, arm_missing.dae)"]
    status, out, err = cli_status(["render", "-o", tmp_path / "world.png"], capsys)    # the bundled world: no warning
    assert status == 0 and not [line for line in err if line.startswith("warning:")]


def test_render_writes_jpeg_when_asked_for_one(tmp_path, capsys):
    from matplotlib.image import imread
    png, jpg = tmp_path / "w.png", tmp_path / "w.jpg"
    assert cli_status(["render", "--width", "160", "--height", "120", "-o", png], capsys)[0] == 0
    assert cli_status(["render", "--width", "160", "--height", "120", "-o", jpg, "--depth", tmp_path / "d.jpeg"],
                      capsys)[0] == 0
    assert jpg.read_bytes()[:3] == b"\xff\xd8\xff" and (tmp_path / "d.jpeg").read_bytes()[:3] == b"\xff\xd8\xff"
    a = imread(png)[..., :3] * 255.0                 # PNG as floats in 0..1
    b = imread(jpg).astype(float)
    assert a.shape == b.shape == (120, 160, 3)
    assert np.abs(a - b).mean() < 4.0                # JPEG at quality 95: a few levels of 255 on average


def test_an_explicit_width_and_height_are_used(tmp_path, capsys):
    assert cli_status(["render", "--width", "33", "--height", "21", "-o", tmp_path / "s.png"], capsys)[0] == 0
    data = (tmp_path / "s.png").read_bytes()
    assert struct.unpack(">II", data[16:24]) == (33, 21)


def test_run_line_names_the_transport_chosen(capsys, monkeypatch):
    from mbsim_ros.ros import transport as transports
    from mbsim_ros.ros import transport_choice

    class Chosen(transports.NullTransport):
        kind = "rclpy"
    monkeypatch.setattr(transport_choice, "transport_for",
                        lambda kind, note=None: Chosen() if kind == "auto" else transports.NullTransport())
    status, out, _ = cli_status(["run", "--duration", "0.01", "--quiet", "--rtf", "0"], capsys)
    assert status == 0 and "; topics on rclpy" in out and "auto" not in out
    status, out, _ = cli_status(["run", "--duration", "0.01", "--quiet", "--rtf", "0", "--transport", "none"], capsys)
    assert status == 0 and "; no live topics" in out and "topics on" not in out


def test_live_topics_text_names_dds_and_its_domain():
    class Dds:
        kind, domain_id = "dds", 7
    assert cli._live_topics(Dds()) == "topics on DDS (cyclonedds, ROS_DOMAIN_ID 7)"


def test_a_nested_namespace_is_kept(capsys):
    status, out, _ = cli_status(["run", "--duration", "0.01", "--quiet", "--rtf", "0", "--transport", "none",
                                 "--namespace", "/lab/robot1"], capsys)
    assert status == 0 and "/lab/robot1/joint_states" in out and "/lab_robot1" not in out


def test_the_run_summary_gives_the_bag_size_and_how_to_make_it_smaller(tmp_path, capsys):
    bag = tmp_path / "bag"
    status, out, _ = cli_status(["run", "--duration", "0.05", "--quiet", "--rtf", "0", "--transport", "none",
                                 "--bag", bag], capsys)
    assert status == 0
    line = out.strip().splitlines()[-1]
    size = sum(p.stat().st_size for p in bag.rglob("*") if p.is_file())
    assert line.startswith(f"wrote bag {bag} ({size / 1e6:.3g} MB; raw camera images are ")
    assert "--compression zstd" in line and "LeftCamera: {enabled: false}" in line and "RightCamera" in line
    config = tmp_path / "no_cameras.yaml"
    config.write_text("sensors: {LeftCamera: {enabled: false}, RightCamera: {enabled: false}}\n")
    status, out, _ = cli_status(["run", "--duration", "0.05", "--quiet", "--rtf", "0", "--transport", "none",
                                 "--bag", tmp_path / "small", "--config", config], capsys)
    line = out.strip().splitlines()[-1]
    assert status == 0 and "camera" not in line and "zstd" not in line
    status, out, _ = cli_status(["run", "--duration", "0.05", "--quiet", "--rtf", "0", "--transport", "none",
                                 "--bag", tmp_path / "zstd", "--compression", "zstd"], capsys)
    line = out.strip().splitlines()[-1]
    assert status == 0 and "raw camera images are" in line and "add --compression" not in line


def test_the_hil_summary_says_what_the_topic_carries(tmp_path, capsys):
    """A device that sends nothing, on_fault sim: the summary says the topic carries the
    simulation (it said `topic: real device` while the log said the simulation)."""
    config = tmp_path / "hil.yaml"
    config.write_text('devices:\n  WaistGyro: {port: "loop://", protocol: csv, on_fault: sim}\n')
    status, out, err = cli_status(["run", "--config", config, "--duration", "0.05", "--quiet", "--rtf", "0",
                                   "--transport", "none"], capsys)
    assert status == 0
    line = next(line for line in out.splitlines() if "device WaistGyro:" in line)
    assert "stale" in line and "the topic carries the simulation" in line and "real device" not in line


# -- OpenSim's y-up models: z_up from the command line, the config and the node -------------------
def test_z_up_from_the_command_line(capsys):
    status, out, _ = cli_status(["info", ARM], capsys)
    assert status == 0 and "gravity [0.0, -9.80665, 0.0]" in out
    status, out, _ = cli_status(["info", ARM, "--z-up"], capsys)
    gravity = [float(x) for x in out.split("gravity [")[1].split("]")[0].split(",")]
    assert status == 0 and np.allclose(gravity, [0, 0, -9.80665], atol=1e-12)
    assert "turned so that OpenSim's +y is the world's +z" in out


def test_z_up_from_the_config_and_the_node_parameter(tmp_path):
    from mbsim_ros.run.config import load_config
    from mbsim_ros.ros.parameters import PARAMETER_DEFAULTS, config_from_parameters
    from mbsim_ros.run.world import load_world
    config_file = tmp_path / "c.yaml"
    config_file.write_text(f"model: {ARM}\nz_up: true\n")
    for config in (load_config(config_file),
                   config_from_parameters(dict(PARAMETER_DEFAULTS, model=ARM, z_up=True), "/")):
        assert config.z_up is True
        (arm,), notes = load_world(config)
        np.testing.assert_allclose(arm.gravity, [0, 0, -9.80665], atol=1e-12)
    (arm,), _ = load_world(load_config(None, {"model": ARM}))
    np.testing.assert_allclose(arm.gravity, [0, -9.80665, 0], atol=1e-12)
    # z_up with no y-up model: said, not silently ignored
    models, notes = load_world(load_config(None, {"z_up": True}))
    assert [m.name for m in models] == ["SR1", "floor"]
    assert any(n.startswith("z_up: no y-up model") for n in notes)


def test_the_walker_stands_on_its_platform_with_z_up():
    """OpenSim's WalkerModel: y up, so without z_up it lies beside its (tilted) platform; with
    z_up gravity is -z, the platform's surface faces up (the file tilts it by 10 degrees: a
    ramp) and the standing foot's contact sphere rests on it (within the file's initial 2.6 cm
    interpenetration), the pelvis above the feet."""
    import mbsim_ros as mb
    path = shared_model("opensim", "WalkerModel.osim")

    def geometry(model):
        T = mb.link_transforms(model, model.initial_q())
        shapes = {s.name: (T[link.name] @ s.pose, s) for link in model.links for s in link.collisions}
        return shapes

    lying = geometry(mb.load_model(path))
    assert abs(lying["PlatformContact"][0][2, 2]) < 0.2           # the plane's normal is horizontal in a z-up view
    model = mb.load_model(path, z_up=True)
    np.testing.assert_allclose(model.gravity, [0, 0, -9.80665], atol=1e-12)
    shapes = geometry(model)
    plane, _ = shapes["PlatformContact"]
    normal, point = plane[:3, 2], plane[:3, 3]
    assert normal[2] == pytest.approx(np.cos(np.radians(10)), abs=1e-4)
    foot, sphere = shapes["RFootContact"]
    gap = normal @ (foot[:3, 3] - point) - sphere.radius
    assert -0.03 < gap <= 0.0
    pelvis = shapes["RHipContact"][0][2, 3]
    assert pelvis > foot[2, 3] + 0.8


# -- convert: meshes RViz reads, beside the URDF ---------------------------------------------------
def _mesh_shapes(model):
    return [s for link in model.links for s in link.visuals if s.kind == "mesh"]


def test_convert_writes_stl_meshes_beside_the_urdf(tmp_path, capsys):
    import mbsim_ros as mb
    source = OWN_MODELS / "opensim" / "features40.osim"        # tetra.vtp, tetra.obj and a missing .vtp
    out = tmp_path / "robot.urdf"
    status, text, err = cli_status(["convert", source, "-o", out], capsys)
    assert status == 0
    assert f"; 4 meshes in {tmp_path / 'robot_meshes'}, named robot_meshes/... relative to the URDF" in text
    assert err == ["note: 1 mesh file(s) not found, left out of the URDF: missing_bone.vtp"]
    urdf = out.read_text()
    assert "file://" not in urdf and ".vtp" not in urdf.replace("missing_bone.vtp", "")
    assert "left out: mesh file missing_bone.vtp not found" in urdf
    files = sorted(p.name for p in (tmp_path / "robot_meshes").iterdir())
    assert "tetra.stl" in files and "tetra_1.stl" in files           # the .vtp and the .obj, both STL now
    assert (tmp_path / "robot_meshes" / "tetra.stl").read_bytes()[:5] != b"solid"    # binary STL
    # the URDF read back has every mesh file's shape the model had, same place, same scaled
    # vertices (STL stores float32: 1e-6 m)
    original = {s.name: s for s in _mesh_shapes(mb.load_model(source)) if s.vertices is not None}
    again = mb.load_model(out)
    assert not again.warnings
    again = {s.name: s for s in _mesh_shapes(again)}
    files = [name for name, s in original.items() if s.mesh_path]
    assert sorted(files) == ["ground_tetra", "thigh_tetra", "tool_tetra"]
    for name in files:
        a, b = original[name], again[name]
        assert b.mesh_path.endswith(".stl")
        np.testing.assert_allclose(np.unique(b.vertices, axis=0), np.unique(a.vertices, axis=0), atol=1e-6)
        np.testing.assert_allclose(b.pose, a.pose, atol=1e-12)


def test_convert_inside_a_ros_package_names_meshes_by_package_uri(tmp_path, capsys):
    import mbsim_ros as mb
    package = tmp_path / "src" / "arm_description"
    (package / "urdf").mkdir(parents=True)
    (package / "package.xml").write_text("<package format='3'><name>my_arm</name></package>")
    out = package / "urdf" / "arm.urdf"
    status, text, _ = cli_status(["convert", OWN_MODELS / "opensim" / "features40.osim", "-o", out], capsys)
    assert status == 0 and "4 meshes" in text and "named package://my_arm/urdf/arm_meshes/..." in text
    urdf = out.read_text()
    assert 'filename="package://my_arm/urdf/arm_meshes/tetra.stl"' in urdf and "file://" not in urdf
    again = mb.load_model(out)                 # our reader finds the package above the URDF
    assert not again.warnings and all(s.vertices is not None for s in _mesh_shapes(again))
