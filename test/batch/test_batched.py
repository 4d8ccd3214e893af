"""`mbsim batch` running scenarios of one model as the worlds of a BatchSimulation: the same rows
bit for bit as one Harness per scenario (a world that blows up, a schedule's commands and
reports included), on Dask and in this process; what stays one by one (a controller, imu_rms, a
function metric, bags) and how scenarios are grouped; the line the command prints."""
import math
import pathlib

import pytest

from batch_world import CART, FLOOR, PD_ARM, cluster, warm  # noqa: F401 (fixtures)
from mbsim_ros.batch import plan as planning
from mbsim_ros.batch.plan import BATCH_MARK, batched_line, plan, ran_batched
from mbsim_ros.batch.spec import load_spec, prepare

pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
pytest.importorskip("dask.distributed", reason="dask[distributed] is a test dependency")

from mbsim_ros.batch.runner import run_batch  # noqa: E402

QUADRUPED = pathlib.Path(__file__).resolve().parents[1] / "models" / "mjcf" / "quadruped.xml"
STATE_METRICS = ("fell", "final_tilt", "max_tilt", "max_contact_force", "max_joint_torque", "distance", "settle_time")
BLOWS_UP = 1e306      # the arm's initial angle: its holding spring's force overflows in the first step


def cart_sweep(**changes):
    """12 scenarios of the cart, one model: 3 initial arm angles (one blows up) x 2 headings x
    2 seeds; the arm held by a position interface, then a schedule: a PD command, an effort,
    and an input no model has (reported in the warnings column)."""
    spec = {
        "world": {"model": f"{CART},{FLOOR}", "pd_gains": {"ARM": PD_ARM}, "command_interfaces": {"ARM": ["position"]}},
        "duration": 0.2,
        "seeds": [0, 1],
        "parameters": {"joint.ARM.q0": {"values": [0.0, 0.3, BLOWS_UP]}, "model.Cart.yaw": {"values": [0.0, 0.5]}},
        "schedules": {"wave": [{"t": 0.05, "joint_commands": {"name": ["ARM"], "position": [0.4]}},
                               {"t": 0.1, "joint_efforts": [0.0] * 6 + [0.01]},
                               {"t": 0.1, "inputs": {"name": ["nope"], "position": [1.0]}}]},
        "schedule": "wave",
        "metrics": {m: {} for m in STATE_METRICS},
    }
    spec.update(changes)
    return spec


def assert_same_rows(a, b, spec):
    """Every column but where and how long: metrics bit for bit (NaN matches NaN)."""
    a = {r["scenario"]: r for r in a}
    b = {r["scenario"]: r for r in b}
    assert a.keys() == b.keys()
    for name in a:
        for column in a[name]:
            if column in ("wall_time", "cpu_time", "worker"):
                continue
            x, y = a[name][column], b[name][column]
            same = x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
            assert same, (name, column, x, y)


def test_batched_rows_equal_one_harness_per_scenario_bit_for_bit_on_dask(cluster, tmp_path):
    spec = prepare(load_spec(cart_sweep()))
    batched = run_batch(spec, str(tmp_path / "batched"), client=cluster[0]).to_pylist()
    alone = run_batch(spec, str(tmp_path / "alone"), client=cluster[0], batched=False).to_pylist()
    assert all(ran_batched(r) for r in batched) and not any(ran_batched(r) for r in alone)
    # one group of 12 on two single-threaded workers: two chunks of 6, one on each
    assert {r["worker"].split(BATCH_MARK)[1] for r in batched} == {"6"}
    assert len({r["worker"] for r in batched}) == 2
    assert_same_rows(batched, alone, spec)
    failed = [r for r in batched if r["joint.ARM.q0"] == BLOWS_UP]
    ok = [r for r in batched if r["joint.ARM.q0"] != BLOWS_UP]
    assert len(failed) == 4 and all(r["status"] == "failed" for r in failed)
    assert all(r["error"].startswith("SimulationError: the simulation blew up at t = 0.001 s") for r in failed)
    assert all(math.isnan(r[m]) for r in failed for m in STATE_METRICS) and all(r["sim_time"] == 0.0 for r in failed)
    assert all(r["status"] == "ok" and r["sim_time"] == pytest.approx(0.2) for r in ok)
    assert all("inputs: no input named 'nope'" in r["warnings"] for r in ok)
    assert not any(r["warnings"] for r in failed)              # it never reached the input at 0.1 s
    # each world had its own initial state: the arm's angle and the heading show in the metrics
    torques = {(r["joint.ARM.q0"], r["model.Cart.yaw"]): r["max_joint_torque"] for r in ok}
    assert torques[(0.0, 0.0)] != torques[(0.3, 0.0)]
    tilts = {(r["joint.ARM.q0"], r["model.Cart.yaw"], r["seed"]): r["max_tilt"] for r in ok}
    assert tilts[(0.3, 0.0, 0)] != tilts[(0.3, 0.5, 0)] and tilts[(0.3, 0.5, 0)] == tilts[(0.3, 0.5, 1)]


def test_in_this_process_an_actuated_world_gives_the_same_rows_batched(tmp_path):
    """The quadruped (position actuators, no held joints) with a schedule of actuator controls, one
    beyond its control range (clamped) and one naming no actuator (reported), run here: the
    chunks on threads of this process."""
    spec = prepare(load_spec({
        "world": {"model": str(QUADRUPED)}, "duration": 0.1, "seeds": [0, 1],
        "parameters": {"model.quadruped.z": {"values": [0.0, 0.05]}, "joint.FR_calf_joint.q0": {"values": [-1.5, -1.2]}},
        "schedules": {"kick": [{"t": 0.02, "actuator_controls": {"name": ["FR_thigh", "FR_calf", "nope"],
                                                                  "effort": [1.0, 9.0, 0.0]}}]},
        "schedule": "kick", "metrics": {m: {} for m in STATE_METRICS}}))
    batched = run_batch(spec, str(tmp_path / "batched"), workers=0).to_pylist()
    alone = run_batch(spec, str(tmp_path / "alone"), workers=0, batched=False).to_pylist()
    assert all(ran_batched(r) for r in batched) and len(batched) == 8
    assert all(r["status"] == "ok" for r in alone), [r["error"] for r in alone]
    assert all("actuator_controls: no actuator named 'nope'" in r["warnings"] for r in alone)
    assert_same_rows(batched, alone, spec)


@pytest.mark.parametrize("change, why", [
    ({"controller": "batch_helpers:push"}, "a controller drives them"),
    ({"parameters": {"controller": {"values": ["batch_helpers:push"]}}}, "a controller drives them"),
    ({"metrics": {"max_tilt": {}, "imu_rms": {}}}, "metric imu_rms reads sensor readings"),
    ({"metrics": {"z": {"function": "batch_helpers:base_z"}}}, "metric z is a function, which may read sensor readings"),
])
def test_what_needs_a_harness_runs_one_by_one(change, why):
    from mbsim_ros.batch.spec import scenarios
    spec = load_spec(cart_sweep(**change))
    work = plan(spec, scenarios(spec), slots=2)
    assert work.reason == why and not work.chunks and len(work.single) == len(scenarios(spec))


def test_kept_bags_and_no_batched_run_one_by_one():
    spec = prepare(load_spec(cart_sweep()))
    assert plan(spec, spec.scenarios, slots=2).batched == 12
    assert plan(spec, spec.scenarios, bags="failed", slots=2).reason == "bags are kept (--bags failed)"
    assert plan(spec, spec.scenarios, batched=False, slots=2).reason == "--no-batched"


def test_an_imu_metric_keeps_the_old_path_and_its_rows(tmp_path):
    spec = prepare(load_spec(cart_sweep(metrics={"imu_rms": {}, "max_tilt": {}},
                                        world={"model": f"{CART},{FLOOR}",
                                               "sensors": {"IMU_GYRO": {"noise": {"stddev": 0.01}}}},
                                        parameters={"joint.ARM.q0": {"values": [0.0, 0.3]}}, schedule=None)))
    rows = run_batch(spec, str(tmp_path / "out"), workers=0).to_pylist()
    assert len(rows) == 4 and not any(ran_batched(r) for r in rows)
    assert all(r["status"] == "ok" and r["imu_rms"] > 0 for r in rows)


def test_scenarios_group_by_model_not_by_initial_state_seed_or_noise(monkeypatch):
    spec = prepare(load_spec(cart_sweep(
        world={"model": f"{CART},{FLOOR}", "sensors": {"IMU_GYRO": {"noise": {"stddev": 0.01}}}}, schedule=None,
        seeds=[0, 1], parameters={"link.ARM.mass": {"values": [0.1, 0.2]}, "joint.ARM.q0": {"values": [0.0, 0.3]},
                                  "model.Cart.x": {"values": [0.0, 1.0]},
                                  "sensor.IMU_GYRO.noise": {"values": [0.0, 0.1]}})))
    work = plan(spec, spec.scenarios, slots=1)
    assert len(work.chunks) == 2 and not work.single          # one per mass, 16 worlds each
    for chunk in work.chunks:
        assert len(chunk) == 16 and len({s["params"]["link.ARM.mass"] for s in chunk}) == 1
    assert [len(c) for c in plan(spec, spec.scenarios, slots=4).chunks] == [8, 8, 8, 8]
    # a scenario alone with its model runs one by one
    lone = plan(spec, spec.scenarios[:1] + [s for s in spec.scenarios if s["params"]["link.ARM.mass"] == 0.2], slots=1)
    assert [len(c) for c in lone.chunks] == [16] and len(lone.single) == 1
    # a chunk's recorded signals stay within MAX_CHUNK_RECORD: fewer worlds per chunk
    monkeypatch.setattr(planning, "MAX_CHUNK_RECORD", 5 * planning.record_bytes(spec))
    assert [len(c) for c in plan(spec, spec.scenarios, slots=1).chunks] == [4, 4, 4, 4, 4, 4, 4, 4]


def test_the_command_says_how_many_scenarios_ran_batched(tmp_path, capsys):
    import yaml
    from mbsim_ros.cli import main
    spec_path = tmp_path / "cart.yaml"
    spec_path.write_text(yaml.safe_dump(cart_sweep(parameters={"joint.ARM.q0": {"values": [0.0, BLOWS_UP]}}),
                                        sort_keys=False))
    for flags, line in (([], "batched: 4 of 4 scenarios ran as the worlds of BatchSimulations"),
                        (["--no-batched"], "batched: 0 of 4 scenarios ran as the worlds of BatchSimulations; each "
                                           "on its own (--no-batched)")):
        status = main(["batch", str(spec_path), "-o", str(tmp_path / f"out{len(flags)}"), "--workers", "0", "--quiet",
                       "--no-plot", *flags])
        out = capsys.readouterr().out
        assert status == 0
        assert [x for x in out.splitlines() if x.startswith("batched:")] == [line + (
            " (worlds of one model stepped together)" if not flags else "")]
        assert "4 scenarios: 2 ok, 2 failed" in out


def test_the_line_names_the_scenarios_that_ran_alone():
    assert batched_line(10, 12) == ("batched: 10 of 12 scenarios ran as the worlds of BatchSimulations; 2 each on "
                                    "its own (no other scenario with their model, or not the model of their group)")
    assert batched_line(0, 3, "a controller drives them").endswith("; each on its own (a controller drives them)")


def test_chunks_on_threads_of_one_process_survive_numbas_workqueue_layer(tmp_path):
    """numba's workqueue layer (where neither OpenMP nor TBB is installed) aborts the process when
    two threads launch parallel kernels at once; chunks on this process's threads (one per core)
    take turns at each step there. A fresh process, since the layer is chosen once per process."""
    import os
    import subprocess
    import sys
    import yaml
    spec_path = tmp_path / "cart.yaml"
    spec_path.write_text(yaml.safe_dump(cart_sweep(parameters={"joint.ARM.q0": {"values": [0.0, 0.3]}}),
                                        sort_keys=False))
    env = dict(os.environ, NUMBA_THREADING_LAYER="workqueue")
    done = subprocess.run([sys.executable, "-m", "mbsim_ros.cli", "batch", str(spec_path), "-o", str(tmp_path / "out"),
                           "--workers", "0", "--quiet", "--no-plot"], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "batched: 4 of 4 scenarios" in done.stdout and "4 scenarios: 4 ok, 0 failed" in done.stdout
