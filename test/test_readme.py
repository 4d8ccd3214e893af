"""The README's code runs as written: every ```python block, in a fresh interpreter from the
repository's root (the block loads the bundled models by their paths in this checkout), and
the `mbsim` lines of its command block that name no placeholder (MODEL, DIR, ...) and need no
serial devices, in order, in a scratch folder."""
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


def blocks(language):
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def environment():
    env = subprocess_env()      # as the session began, before `import opensim` rewrote LD_LIBRARY_PATH
    return dict(env, PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))


PYTHON_BLOCKS = blocks("python")


def test_the_readme_has_python_blocks():
    assert PYTHON_BLOCKS and "import mbsim_ros as mb" in PYTHON_BLOCKS[0]


@pytest.mark.parametrize("k", range(len(PYTHON_BLOCKS)))
def test_python_block_runs_as_written(k):
    p = subprocess.run([sys.executable, "-c", PYTHON_BLOCKS[k]], cwd=REPO, env=environment(),
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr


def command_lines():
    """The concrete `mbsim` lines of the README's command blocks, comments cut off."""
    out = []
    for block in blocks("bash"):
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
    lines = command_lines()
    assert [w[:2] for w in lines] == [["mbsim", "run"], ["mbsim", "plot"], ["mbsim", "plot"],
                                      ["mbsim", "render"], ["mbsim", "render"]]
    for words in lines:
        p = subprocess.run([sys.executable, "-m", "mbsim_ros.cli", *words[1:]], cwd=tmp_path, env=environment(),
                           capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, (words, p.stderr[-3000:])
    for name in ("run1", "run1.png", "legs.png", "world.png", "left.png", "left_depth.png"):
        assert (tmp_path / name).exists(), name
