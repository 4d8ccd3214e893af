"""What `mbsim` prints besides its results: Python warnings as one line (never a source file or
code line), no meaningless lines in the run summary, hints where a run goes wrong."""
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import shared_model, subprocess_env

REPO = Path(__file__).resolve().parent.parent

WARNS = """
import warnings, mbsim_ros.cli as cli
def info(args):
    warnings.warn_explicit("overflow encountered in\\n  multiply", RuntimeWarning, "/src/kernels.py", 12)
    warnings.warn("the model's friction is ignored")
    return 0
cli.cmd_info = info
raise SystemExit(cli.main(["info", "anything.urdf"]))
"""


def test_python_warnings_are_one_line_without_source(tmp_path):
    p = subprocess.run([sys.executable, "-c", WARNS], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=subprocess_env(PYTHONPATH=str(REPO)))
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines() == ["warning: RuntimeWarning: overflow encountered in multiply",
                                     "warning: the model's friction is ignored"]


def run_mbsim(tmp_path, *argv):
    env = subprocess_env(PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    p = subprocess.run([sys.executable, "-m", "mbsim_ros.cli", "run", *map(str, argv)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    return p.stdout, p.stderr




def test_a_robot_started_inside_the_ground_is_named_and_topics_nobody_read_are_explained(tmp_path):
    """The quadruped floating 10 cm into the ground plane: a start-up line names it and the
    ground and suggests --on-ground; the summary gives the floating base's final position; the
    live DDS topics that nobody subscribed to (all of them here) are counted in one line."""
    pytest.importorskip("cyclonedds")
    out, err = run_mbsim(tmp_path, shared_model("urdf", "quadruped.urdf"), "--floating-base", "--pose", 0, 0, -0.1, 0, 0, 0, "--duration", 0.02,
                         "--rtf", 0, "--transport", "dds", "--quiet")
    inside = [line for line in err.splitlines() if "start inside each other" in line]
    assert len(inside) == 1 and "ground" in inside[0] and "--on-ground" in inside[0], err
    assert "final position of base_link: [" in out, out
    topics = out.split("messages per topic")[1].splitlines()[1:]
    silent = [line for line in topics if line.startswith("  ") and line.split()[1] == "0"]
    assert silent, out
    assert (f"lazy: {len(silent)} topics not published, nobody subscribed; --transport none --bag DIR records "
            "them all") in out


def test_a_fixed_arm_has_no_final_position_line(tmp_path):
    # its file has no link named world: --fixed-base welds it as an arm on a table
    out, _ = run_mbsim(tmp_path, shared_model("urdf", "double_pendulum_simple.urdf"), "--fixed-base", "--duration", 0.02,
                       "--rtf", 0, "--transport", "none", "--quiet")
    assert "final position" not in out and "contacts" in out, out
    assert "lazy:" not in out                         # "none" counts every message: nothing left out


def test_a_slow_paced_run_says_so_once_with_a_hint(capsys):
    from mbsim_ros.cli import SlowRunHint
    hint = SlowRunHint(1.0)
    hint(dict(rtf=0.3, rtf_recent=0.3, wall_time=0.5))          # too early to judge
    hint(dict(rtf=0.9, rtf_recent=0.8, wall_time=1.5))          # keeping up
    assert capsys.readouterr().err == ""
    hint(dict(rtf=0.5, rtf_recent=0.12, wall_time=2.0))
    hint(dict(rtf=0.4, rtf_recent=0.10, wall_time=3.0))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("note: running at rtf 0.12 (of 1)") and "--on-ground" in err[0]
    unpaced = SlowRunHint(0.0)
    unpaced(dict(rtf=0.1, rtf_recent=0.1, wall_time=5.0))       # --rtf 0: no pace to keep
    assert capsys.readouterr().err == ""
