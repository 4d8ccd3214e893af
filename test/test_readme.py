"""The README's code runs as written: every ```python block of the README and of docs/, in a
fresh interpreter from the repository's root (the blocks load the bundled models by their paths
in this checkout), and the `mbsim` lines of the README's "first ten minutes" that name no
placeholder (MODEL, DIR, ...), in order, in a scratch folder; and the commands of "Your own
robot" as written, in bash."""
import importlib.metadata
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest
from conftest import subprocess_env

REPO = pathlib.Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
DOCS = [README] + [p.read_text(encoding="utf-8") for p in sorted((REPO / "docs").glob("*.md"))]


def blocks(language, texts=(README,)):
    return [b for text in texts for b in re.findall(rf"```{language}\n(.*?)```", text, re.S)]


def section(title):
    """The README's text under the heading `## title`, up to the next such heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert match, f"README has no section {title!r}"
    return match.group(1)


def environment():
    env = subprocess_env()      # as the session began, before `import opensim` rewrote LD_LIBRARY_PATH
    return dict(env, PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))


PYTHON_BLOCKS = blocks("python", DOCS)


def test_the_readme_has_python_blocks():
    assert PYTHON_BLOCKS and "import mbsim_ros as mb" in PYTHON_BLOCKS[0]


@pytest.mark.parametrize("k", range(len(PYTHON_BLOCKS)))
def test_python_block_runs_as_written(k):
    p = subprocess.run([sys.executable, "-c", PYTHON_BLOCKS[k]], cwd=REPO, env=environment(),
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr


def command_lines(text):
    """The concrete `mbsim` lines of the command blocks in `text`, comments cut off."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if not line.startswith("mbsim "):
                continue
            words = shlex.split(line)
            placeholder = any(re.fullmatch(r"\[?[A-Z][A-Z_]*\]?|.*\|.*|\.\.\.\]?", w) for w in words)
            if placeholder or "hil.yaml" in line:            # hil.yaml names serial ports of real devices
                continue
            out.append(words)
    return out


def test_the_command_lines_run_as_written(tmp_path):
    lines = command_lines(section("The first ten minutes"))
    assert [w[:2] for w in lines] == [["mbsim", "run"], ["mbsim", "plot"], ["mbsim", "plot"],
                                      ["mbsim", "render"], ["mbsim", "render"]]
    for words in lines:
        p = subprocess.run([sys.executable, "-m", "mbsim_ros.cli", *words[1:]], cwd=tmp_path, env=environment(),
                           capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, (words, p.stderr[-3000:])
    for name in ("run1", "run1.png", "legs.png", "world.png", "left.png", "left_depth.png"):
        assert (tmp_path / name).exists(), name


def test_your_own_robot_runs_as_written(tmp_path):
    """The command block of "Your own robot", in order, in one bash script (its variables carry
    over), in a scratch folder holding the clone's test/ (the xacro line names a file there).
    `pip install` lines are checked as installed instead of run: the test extra has them."""
    (block,) = re.findall(r"```bash\n(.*?)```", section("Your own robot"), re.S)
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("pip install "):
            for name in shlex.split(line)[2:]:
                importlib.metadata.version(name)           # PackageNotFoundError: not installed
    script = [line for line in lines if not line.startswith("pip install ")]
    runs = [line for line in script if line.startswith("mbsim run ")]
    assert len(runs) >= 3 and any(".xacro" in line and ":=" in line for line in runs)
    # a URDF floats unless welded to `world`: the recipe needs no --floating-base to say so
    assert any("--on-ground" in line for line in runs)
    assert not any("--floating-base" in line for line in script), script
    (tmp_path / "test").symlink_to(REPO / "test", target_is_directory=True)
    python = shlex.quote(sys.executable)
    preamble = (f"set -euo pipefail\nmbsim() {{ {python} -m mbsim_ros.cli \"$@\"; }}\n"
                f"python() {{ {python} \"$@\"; }}\n")
    p = subprocess.run(["bash", "-c", preamble + "\n".join(script)], cwd=tmp_path, env=environment(),
                       capture_output=True, text=True, timeout=3000)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert not re.search(r"\.py:\d+: \w*Warning", p.stderr), p.stderr[-3000:]     # a raw Python warning
    summaries = [line for line in p.stdout.splitlines() if line.endswith(" contacts")]
    assert len(summaries) == len(runs), p.stdout[-3000:]
    floating, arm = summaries[0], summaries[1]
    z = float(floating.split("[")[1].split("]")[0].split()[2])
    assert z > 0.05, floating            # solo12's base above the ground it was lowered onto
    assert "root link base_link floats (no link named world welds it" in p.stderr, p.stderr[-3000:]
    assert "final position" not in arm   # welded to the world: nothing moved it
