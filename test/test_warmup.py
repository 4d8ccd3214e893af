"""`mbsim warmup`: kernel groups compile in processes, one per core, in the order their callees
need; progress and ETA count measured CPU seconds; afterwards a fresh `mbsim run` compiles
nothing and does not say it compiles."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import warmup_groups
from conftest import COUNT_COMPILES, lower_priority, subprocess_env
from mbsim_ros import warmup
from mbsim_ros.warmup import Group, warm_up_everything

REPO = Path(__file__).resolve().parent.parent


def read_log(path):
    rows = [line.split() for line in path.read_text().splitlines()]
    return {(name, what): (int(pid), float(t)) for name, what, pid, t in rows}


def test_groups_run_in_worker_processes_after_the_groups_they_need(tmp_path, monkeypatch):
    monkeypatch.setenv("MBSIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WARMUP_LOG", str(tmp_path / "log"))
    groups = [Group("first", warmup_groups.first, 1.0), Group("second", warmup_groups.second, 1.0),
              Group("third", warmup_groups.third, 1.0, after=("first", "second"))]
    seen = []
    done = warm_up_everything(seen.append, groups=groups, workers=2, poll=0.1)
    assert set(done) == {"first", "second", "third"}
    assert all(n >= 1 for _, n in done.values())               # each compiled its function
    log = read_log(tmp_path / "log")
    pids = {log[name, "start"][0] for name in ("first", "second", "third")}
    assert os.getpid() not in pids and len(pids) == 2          # two worker processes, not this one
    assert log["third", "start"][1] >= max(log["first", "end"][1], log["second", "end"][1])
    fractions = [p.fraction for p in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any(0.0 < f < 1.0 for f in fractions), fractions    # it moved while groups compiled
    assert any(p.running for p in seen) and seen[-1].done == 3
    stored = json.loads((tmp_path / "cache" / warmup.COSTS_FILE).read_text())
    assert {"first", "second", "third"} <= set(stored) and all(0.5 < stored[n] < 30 for n in ("first", "second"))


def test_the_eta_starts_from_the_measured_costs(tmp_path, monkeypatch):
    """Stored costs (a previous cold warm-up) replace the table's: 40 + 20 CPU s on 2 cores is
    an ETA of about 30 s at the first poll, whatever the table says."""
    monkeypatch.setenv("MBSIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WARMUP_LOG", str(tmp_path / "log"))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / warmup.COSTS_FILE).write_text(json.dumps({"first": 40.0, "second": 20.0}))
    groups = [Group("first", warmup_groups.first, 1.0), Group("second", warmup_groups.second, 1.0)]
    seen = []
    warm_up_everything(seen.append, groups=groups, workers=2, poll=0.1)
    assert 20.0 < seen[0].eta <= 30.0, seen[0]


def test_a_group_that_fails_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("MBSIM_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(RuntimeError, match="warm-up of bad kernels failed: ValueError: no such kernel"):
        warm_up_everything(None, groups=[Group("bad kernels", warmup_groups.broken, 1.0)], workers=1)


COUNT_AND_RUN = """
import sys
""" + COUNT_COMPILES + """from mbsim_ros.cli import main
status = main(["run", "--duration", "0.01", "--transport", "none", "--quiet"])
# models that start inside each other: the start check's collision kernel (the bundled world's
# start does not call it)
import numpy as np
from mbsim_ros.dynamics import Physics
from mbsim_ros.dynamics.placement import overlaps
from mbsim_ros.warmup import _world
overlaps(Physics(_world()), min_depth=-np.inf)
print("COMPILED", ",".join(compiled))
sys.exit(status)
"""


def test_after_mbsim_warmup_a_first_run_compiles_nothing(tmp_path):
    """`mbsim warmup` on this installation's cache (the README's set-up, which CI runs cold before
    the suite: every group; on a developer's machine it compiles what is missing), then a fresh
    `mbsim run` compiles no kernel and does not say it compiles, nor does the start check of
    models that start inside each other (its collision kernel). (A second cold compile of every
    kernel here would cost minutes of CI for what test_compile_once proves on cold caches.)"""
    env = subprocess_env(PYTHONPATH=str(REPO))
    warm = subprocess.run([sys.executable, "-m", "mbsim_ros.cli", "warmup", "--quiet"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=3000, preexec_fn=lower_priority)
    assert warm.returncode == 0, warm.stderr[-3000:]
    assert "every kernel is ready" in warm.stdout, warm.stdout
    run = subprocess.run([sys.executable, "-c", COUNT_AND_RUN], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=3000)
    assert run.returncode == 0, run.stderr[-3000:]
    compiled = run.stdout.split("COMPILED")[-1].strip()
    assert compiled == "", f"the first run after the warm-up compiled {compiled}"
    assert "compil" not in run.stderr, run.stderr
