"""A script run from the folder that holds a clone named mbsim_ros: `import mbsim_ros` finds the
clone folder first (the script's folder leads sys.path). Without the clone's own __init__.py it
is an empty namespace package and mb.load_model an AttributeError."""
import pathlib
import subprocess
import sys

from conftest import subprocess_env

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_a_script_beside_a_clone_named_mbsim_ros_gets_the_package(tmp_path):
    (tmp_path / "mbsim_ros").symlink_to(REPO, target_is_directory=True)     # the clone, as cloned
    (tmp_path / "script.py").write_text(
        "import mbsim_ros as mb\n"
        "from mbsim_ros.model import Model\n"
        "model = mb.load_model('mbsim_ros/mbsim_ros/data/models/SR1.wrl')\n"
        "print(mb.__file__, model.nv, isinstance(model, Model))\n")
    env = subprocess_env()
    env.pop("PYTHONPATH", None)
    p = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    path, nv, same_class = p.stdout.split()
    assert pathlib.Path(path) == tmp_path / "mbsim_ros" / "mbsim_ros" / "__init__.py"
    assert int(nv) > 6 and same_class == "True"
