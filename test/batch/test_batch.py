"""`mbsim batch` on a LocalCluster of two worker processes (loopback): the rows a grid and a
random sample give, bit-identical seeds across batches and against a plain Simulation, failed
rows, a worker killed mid-batch, --resume, --compare, bags, and bad specs."""
import itertools
import math
import sys

import numpy as np
import pytest

from batch_world import CART, FLOOR, PD_ARM, cart_spec, cluster, warm  # noqa: F401 (fixtures)
from mbsim_ros.batch.pytest_plugin import mbsim_world  # noqa: F401 (the fixture, also where the plugin is not installed)
from mbsim_ros.batch.spec import SpecError, load_spec, prepare

pa = pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("dask.distributed", reason="dask[distributed] is a test dependency")

from mbsim_ros.batch.runner import BatchInterrupted, run_batch  # noqa: E402


def rows_of(table):
    return {r["scenario"]: r for r in table.to_pylist()}


@pytest.fixture(scope="module")
def grid(cluster, tmp_path_factory):
    """The cart grid (2 masses x 2 dampings x 2 seeds) run once on the cluster."""
    spec = prepare(load_spec(cart_spec()))
    out = tmp_path_factory.mktemp("grid") / "out"
    return spec, out, run_batch(spec, str(out), client=cluster[0])


def test_a_grid_gives_one_ok_row_per_combination_and_seed(grid):
    spec, out, table = grid
    rows = table.to_pylist()
    expected = set(itertools.product([0.1, 0.3], [0.1, 1.0], [0, 1]))
    got = [(r["link.ARM.mass"], r["joint.ARM.damping"], r["seed"]) for r in rows]
    assert sorted(got) == sorted(expected)                     # each exactly once
    assert [r["scenario"] for r in rows] == [f"s{k:05d}" for k in range(8)]
    assert all(r["status"] == "ok" and r["error"] == "" for r in rows), [r["error"] for r in rows]
    assert all(math.isfinite(r[m]) for r in rows for m in spec.metrics)
    assert all(r["sim_time"] == pytest.approx(0.2) for r in rows)
    # the parameters reached the physics: the heavier arm presses the floor harder
    light = [r["max_contact_force"] for r in rows if r["link.ARM.mass"] == 0.1]
    heavy = [r["max_contact_force"] for r in rows if r["link.ARM.mass"] == 0.3]
    assert min(heavy) > max(light)
    # two workers shared the work
    assert len({r["worker"] for r in rows}) == 2
    on_disk = pq.read_table(out / "results.parquet")
    assert on_disk.equals(table)


def kernel_cache_stats():
    """In a worker: (cache hits, cache misses = compilations) of the kernels a scenario runs."""
    from mbsim_ros.batch.record import record_kernel
    from mbsim_ros.dynamics.step import step_semi_implicit_euler
    from mbsim_ros.sensors.kinematic import sense_kernel
    return {f.__name__: (sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values()))
            for f in (step_semi_implicit_euler, sense_kernel, record_kernel)}


def test_workers_load_the_kernels_from_the_cache_instead_of_compiling(grid, cluster):
    """prepare() ran the world here first; each worker then loads every kernel from the numba
    cache (a hit) and compiles none (no miss)."""
    stats = cluster[0].run(kernel_cache_stats)
    assert len(stats) == 2
    for worker, kernels in stats.items():
        for name, (hits, misses) in kernels.items():
            assert hits >= 1 and misses == 0, (worker, name, hits, misses)


def test_a_random_sample_draws_n_points_inside_the_ranges_crossed_with_the_seeds(cluster, tmp_path):
    spec = prepare(load_spec(cart_spec(sample="random", n=3, sample_seed=7, parameters={
        "link.ARM.mass": {"range": [0.1, 0.4]}, "model.Cart.yaw": {"range": [-0.5, 0.5]},
        "joint.ARM.damping": {"values": [0.2, 0.5]}})))
    table = run_batch(spec, str(tmp_path / "out"), client=cluster[0])
    rows = table.to_pylist()
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
    points = {(r["link.ARM.mass"], r["model.Cart.yaw"], r["joint.ARM.damping"]) for r in rows}
    assert len(points) == 3                                     # 3 samples, each with both seeds
    for mass, yaw, damping in points:
        assert 0.1 <= mass <= 0.4 and -0.5 <= yaw <= 0.5 and damping in (0.2, 0.5)
    assert sorted(r["seed"] for r in rows) == [0, 0, 0, 1, 1, 1]
    # the same sample_seed draws the same points; another draws others
    again = {tuple(s["params"].values()) for s in prepare(load_spec(cart_spec(
        sample="random", n=3, sample_seed=7, parameters=spec_parameters(spec)))).scenarios}
    assert again == points


def spec_parameters(spec):
    return {a.name: ({"values": a.values} if a.values is not None else {"range": [a.low, a.high]}) for a in spec.axes}


def test_a_latin_hypercube_puts_one_sample_in_each_stratum_of_each_range():
    spec = load_spec(cart_spec(sample="lhs", n=5, seeds=[0], parameters={
        "link.ARM.mass": {"range": [0.1, 0.6]}, "joint.ARM.damping": {"range": [0.0, 5.0]}}))
    from mbsim_ros.batch.spec import scenarios
    points = [s["params"] for s in scenarios(spec)]
    assert len(points) == 5
    mass_bins = sorted(int((p["link.ARM.mass"] - 0.1) / 0.1) for p in points)
    damping_bins = sorted(int(p["joint.ARM.damping"] / 1.0) for p in points)
    assert mass_bins == [0, 1, 2, 3, 4] and damping_bins == [0, 1, 2, 3, 4]


def test_the_same_seed_is_bit_identical_in_two_batches_and_in_a_plain_simulation(grid, cluster, tmp_path):
    spec, _, first = grid
    again = run_batch(prepare(load_spec(cart_spec())), str(tmp_path / "again"), client=cluster[0])
    a, b = rows_of(first), rows_of(again)
    for name in a:
        for m in spec.metrics:
            assert a[name][m] == b[name][m], (name, m)          # bit for bit, not approximately
    # seeds matter: the noisy gyro differs between seeds 0 and 1 of one point
    by_seed = {r["seed"]: r["gyro_x"] for r in a.values() if r["link.ARM.mass"] == 0.1 and r["joint.ARM.damping"] == 0.1}
    assert by_seed[0] != by_seed[1]
    # a plain in-process mb.Simulation with the same world, override and seed
    import mbsim_ros as mb
    from mbsim_ros.run.world import hold_initial_pose
    row = next(r for r in a.values() if r["link.ARM.mass"] == 0.3 and r["joint.ARM.damping"] == 1.0 and r["seed"] == 1)
    cart, floor = mb.load_model(str(CART)), mb.load_model(str(FLOOR))
    hold_initial_pose([cart, floor], 2000.0)                    # the run configuration's default hold
    arm = cart.link("ARM")
    arm.inertia = arm.inertia * (0.3 / arm.mass)
    arm.mass = 0.3
    cart.joint("ARM").damping[:] = 1.0
    cart.finalize()
    sim = mb.Simulation([cart, floor], dt=0.001, seed=1, sensors={"IMU_GYRO": {"noise": {"stddev": 0.01}}})
    gyro = []
    last = None
    for _ in range(200):
        sim.step()
        r = sim.readings().get("IMU_GYRO")
        if r is not None and r is not last:
            gyro.append(r.values)
            last = r
    assert row["base_z"] == sim.q[2]
    assert row["arm"] == sim.q[7]
    assert row["gyro_x"] == gyro[-1][0]
    g = np.array(gyro)
    assert row["imu_rms"] == np.sqrt(((g - g.mean(axis=0)) ** 2).sum(axis=1).mean())


def test_a_scenario_that_blows_up_is_a_failed_row_and_the_batch_goes_on(cluster, tmp_path):
    spec = prepare(load_spec(cart_spec(seeds=[0], controller="batch_helpers:push", parameters={
        "controller.effort": {"values": [0.0, 1e308]}})))
    table = run_batch(spec, str(tmp_path / "out"), client=cluster[0], bags="failed")
    rows = {r["controller.effort"]: r for r in table.to_pylist()}
    assert rows[0.0]["status"] == "ok" and math.isfinite(rows[0.0]["max_tilt"])
    bad = rows[1e308]
    assert bad["status"] == "failed"
    assert bad["error"].startswith("SimulationError: the simulation blew up")
    assert all(math.isnan(bad[m]) for m in spec.metrics)
    assert 0 < bad["sim_time"] < 0.2
    # --bags failed: the failed scenario's bag, readable by an independent reader; none for the ok one
    reader = pytest.importorskip("mcap_ros2.reader", reason="mcap-ros2-support is a test dependency")
    bags = tmp_path / "out" / "bags"
    assert [p.name for p in bags.iterdir()] == [bad["scenario"]]
    mcap = next((bags / bad["scenario"]).glob("*.mcap"))
    topics = {m.channel.topic for m in reader.read_ros2_messages(str(mcap))}
    assert {"/Cart/joint_states", "/Cart/IMU_GYRO", "/clock", "/tf"} <= topics
    assert (bags / bad["scenario"] / "metadata.yaml").exists()


def test_a_worker_killed_mid_batch_has_its_scenario_rerun_and_every_row_arrives(cluster, tmp_path):
    marker = tmp_path / "killed-once"
    spec = prepare(load_spec(cart_spec(seeds=[0, 1, 2, 3], parameters={}, controller="batch_helpers:die_once",
                                       controller_options={"marker": str(marker)})))
    table = run_batch(spec, str(tmp_path / "out"), client=cluster[0])
    rows = table.to_pylist()
    assert marker.exists()                                      # a worker process really died
    assert sorted(r["seed"] for r in rows) == [0, 1, 2, 3]
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    # the nanny restarts the worker (a fresh process: imports, kernel cache load); on a loaded
    # machine that takes a while, hence the generous timeout
    cluster[0].wait_for_workers(2, timeout=300)


def test_resume_after_an_interrupt_runs_only_the_missing_scenarios(grid, cluster, tmp_path):
    spec = prepare(load_spec(cart_spec()))
    out = str(tmp_path / "out")
    seen = []

    def interrupt_after_three(row):
        seen.append(row["scenario"])
        if len(seen) == 3:
            raise KeyboardInterrupt
    with pytest.raises(BatchInterrupted, match="interrupted: 3 of 8 scenarios kept"):
        run_batch(spec, out, client=cluster[0], on_row=interrupt_after_three)
    with pytest.raises(SpecError, match="holds a batch already; --resume"):
        run_batch(spec, out, client=cluster[0])
    rerun = []
    table = run_batch(spec, out, client=cluster[0], resume=True, on_row=lambda r: rerun.append(r["scenario"]))
    assert len(rerun) == 5 and not set(rerun) & set(seen)
    full = rows_of(grid[2])
    for name, row in rows_of(table).items():
        assert {m: row[m] for m in spec.metrics} == {m: full[name][m] for m in spec.metrics}
    again = []
    run_batch(spec, out, client=cluster[0], resume=True, on_row=lambda r: again.append(r))
    assert again == []                                           # nothing left to run


def run_cli(argv, capsys):
    from mbsim_ros.cli import main
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def test_compare_passes_an_unchanged_batch_and_flags_a_moved_metric(grid, cluster, tmp_path, capsys):
    import yaml
    spec_path = tmp_path / "cart.yaml"
    spec_path.write_text(yaml.safe_dump(cart_spec(), sort_keys=False))
    baseline = grid[1] / "results.parquet"
    scheduler = cluster[0].scheduler.address
    assert scheduler.startswith("tcp://127.0.0.1:")
    status, out, err = run_cli(["batch", str(spec_path), "-o", str(tmp_path / "same"), "--scheduler", scheduler,
                                "--compare", str(baseline), "--quiet"], capsys)
    assert status == 0, err
    assert "no metric moved beyond its tolerance" in out
    assert (tmp_path / "same" / "summary.png").stat().st_size > 10000
    # a baseline in which one scenario's max_tilt and arm differ: max_tilt (tolerance 0) is
    # flagged, arm within its tolerance 1e-6 is not, one beyond it is
    table = pq.read_table(baseline).to_pylist()
    table[2]["max_tilt"] += 1e-9
    table[3]["arm"] += 5e-7
    table[4]["arm"] += 5e-6
    changed = tmp_path / "changed.parquet"
    pq.write_table(pa.Table.from_pylist(table, schema=pq.read_schema(baseline)), changed)
    status, out, err = run_cli(["batch", str(spec_path), "-o", str(tmp_path / "again"), "--scheduler", scheduler,
                                "--compare", str(changed), "--quiet"], capsys)
    assert status == 1, err
    listed = [line.split()[:2] for line in out.splitlines() if line.startswith("  s0")]
    assert listed == [[table[2]["scenario"], "max_tilt:"], [table[4]["scenario"], "arm:"]], out
    assert f"seed {table[4]['seed']}, link.ARM.mass {table[4]['link.ARM.mass']:g}" in out


@pytest.mark.parametrize("change, message", [
    ({"parameters": {"link.NOPE.mass": {"values": [1.0]}}}, "parameters.link.NOPE.mass: no link named 'NOPE'"),
    ({"parameters": {"link.ARM.mass": {"range": [0.5, 0.1], "steps": 2}}}, "expected low < high"),
    ({"parameters": {"link.ARM.mass": {"values": [-1.0]}}}, "expected a finite number > 0"),
    ({"parameters": {"link.ARM.size": {"values": [1.0]}}}, "unknown parameter"),
    ({"parameters": {"joint.ARM.damping": {"range": [0.0, 1.0]}}}, "a grid needs steps"),
    ({"metrics": {"wobble": {}}}, "unknown metric 'wobble'"),
    ({"duratoin": 1.0}, "duratoin: unknown key"),
    ({"world": {"devices": {"IMU_GYRO": {}}}}, "world.devices"),
    ({"sample": "random"}, "n: missing"),
    ({"controller": "nowhere_module:drive"}, "controller: nowhere_module:drive: cannot import"),
    ({"parameters": {"sensor.IMU_ACC.noise": {"values": [0.1, 0.1]}}}, "a value appears twice"),
    ({"world": {"model": f"{CART},{FLOOR}", "sensors": {"NO_SUCH": {"rate": 10}}}}, "unknown sensor(s) NO_SUCH"),
])
def test_a_bad_spec_ends_in_one_line_and_exit_status_2(change, message, tmp_path, capsys):
    import yaml
    spec_path = tmp_path / "bad.yaml"
    spec_path.write_text(yaml.safe_dump(cart_spec(**change)))
    status, out, err = run_cli(["batch", str(spec_path), "-o", str(tmp_path / "out"), "--quiet"], capsys)
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"mbsim: {spec_path}: ")
    assert message in err
    assert not (tmp_path / "out").exists()


def test_the_scheduler_address_can_come_from_the_environment(cluster, tmp_path, capsys, monkeypatch):
    import yaml
    spec_path = tmp_path / "cart.yaml"
    spec_path.write_text(yaml.safe_dump(cart_spec(seeds=[0], parameters={}), sort_keys=False))
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", cluster[0].scheduler.address)
    status, out, err = run_cli(["batch", str(spec_path), "-o", str(tmp_path / "out"), "--quiet", "--no-plot"], capsys)
    assert status == 0, err
    assert f"on the Dask cluster at {cluster[0].scheduler.address}" in out
    assert "1 scenarios: 1 ok, 0 failed" in out
    assert not (tmp_path / "out" / "summary.png").exists()


def test_without_dask_or_pyarrow_the_command_says_what_to_install(tmp_path, capsys, monkeypatch):
    import yaml
    spec_path = tmp_path / "cart.yaml"
    spec_path.write_text(yaml.safe_dump(cart_spec(seeds=[0], parameters={})))
    monkeypatch.setitem(sys.modules, "pyarrow", None)          # import pyarrow -> ImportError
    status, out, err = run_cli(["batch", str(spec_path), "-o", str(tmp_path / "out")], capsys)
    assert status == 2
    assert err.strip().splitlines() == ["mbsim: mbsim batch needs dask[distributed] and pyarrow (pyarrow is "
                                        "missing): pip install mbsim_ros[batch]"]


def test_ctrl_c_keeps_the_finished_rows_and_resume_runs_the_rest(tmp_path):
    """A real SIGINT to `mbsim batch` (in-process scenarios, --workers 0) once rows are on disk."""
    import os
    import signal
    import subprocess
    import time
    import yaml
    from batch_world import HERE
    spec_path = tmp_path / "cart.yaml"
    # 60 scenarios of 1 s: several seconds of work, so the interrupt (once the first part file
    # is written, after about 2 s) comes mid-batch even on an idle machine
    spec_path.write_text(yaml.safe_dump(cart_spec(seeds=list(range(60)), parameters={}, duration=1.0), sort_keys=False))
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", "mbsim_ros.cli", "batch", str(spec_path), "-o", str(out), "--workers", "0", "--quiet"]
    # SIGINT as an interactive Ctrl-C delivers it: a test run started in the background by a
    # non-interactive shell has SIGINT ignored, which the child would inherit (and then finish
    # the batch with status 0); Python installs its KeyboardInterrupt handler only over the default
    interactive = [sys.executable, "-c", "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                   "sys.argv = ['mbsim'] + sys.argv[1:]; runpy.run_module('mbsim_ros.cli', run_name='__main__')"]
    proc = subprocess.Popen(interactive + command[3:], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not any((out / "parts").glob("part-*.parquet")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    kept = int(stderr.strip().splitlines()[-1].split("interrupted: ")[1].split(" of ")[0])
    assert 0 < kept < 60 and stderr.strip().splitlines()[-1].endswith("--resume runs the rest")
    done = subprocess.run(command + ["--resume", "--no-plot"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert sorted(r["seed"] for r in rows) == list(range(60))
    assert all(r["status"] == "ok" for r in rows)


def test_the_world_travels_by_content_and_all_bags_are_kept(cluster, tmp_path):
    """The model file is gone before the batch runs: workers never read client paths. --bags all
    keeps every scenario's bag."""
    import shutil
    copy = tmp_path / "cart_copy.wrl"
    shutil.copy(CART, copy)
    spec = prepare(load_spec(cart_spec(seeds=[0, 1], parameters={}, world={"model": f"{copy},{FLOOR}"})))
    copy.unlink()
    table = run_batch(spec, str(tmp_path / "out"), client=cluster[0], bags="all")
    rows = table.to_pylist()
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["error"] for r in rows]
    bags = tmp_path / "out" / "bags"
    assert sorted(p.name for p in bags.iterdir()) == ["s00000", "s00001"]
    assert all(any((bags / s).glob("*.mcap")) and (bags / s / "metadata.yaml").exists() for s in ("s00000", "s00001"))


def test_a_tests_scenario_function_runs_unchanged_as_a_batch(mbsim_world, cluster, tmp_path):
    """batch_helpers.wave drives a world the way a test does (commands, world.run); the batch
    names it as its controller and gets the same run, bit for bit."""
    from batch_helpers import wave
    from mbsim_ros.batch.runner import run_batch
    from mbsim_ros.batch.spec import load_spec, prepare
    world = mbsim_world(f"{CART},{FLOOR}", config={"seed": 3, "sensors": {"IMU_GYRO": {"noise": {"stddev": 0.01}}},
                                       "pd_gains": {"ARM": PD_ARM}})
    wave(world, amplitude=0.2)
    world.run_until(0.2)
    sig = world.signals()
    spec = prepare(load_spec(cart_spec(seeds=[3], parameters={"controller.amplitude": {"values": [0.2, 0.4]}},
                                       controller="batch_helpers:wave")))
    rows = {r["controller.amplitude"]: r for r in run_batch(spec, str(tmp_path / "out"), client=cluster[0]).to_pylist()}
    assert rows[0.2]["status"] == "ok", rows[0.2]["error"]
    assert rows[0.2]["arm"] == sig.joint("ARM")[-1]
    assert rows[0.2]["gyro_x"] == sig.readings["IMU_GYRO"][1][-1, 0]
    assert rows[0.2]["max_tilt"] == sig.metric("max_tilt")
    assert rows[0.4]["arm"] != rows[0.2]["arm"]


def test_a_scenario_no_worker_survives_is_a_failed_row_not_a_failed_batch(warm, tmp_path):
    """A scheduler allowing no retries (allowed-failures 0): the worker dies once, the task is
    given up (KilledWorker), its row says so, the other scenarios' rows are fine. (Six tasks on one
    thread are "root-ish" for the scheduler, so they wait in its queue; worker-saturation 1.0 sends
    one at a time: a task already waiting on the worker would die with it.)"""
    import logging
    import dask
    from dask.distributed import Client, LocalCluster
    # the whole test in the settings: the nanny restarts the dead worker during run_batch, and on a
    # busy machine a worker's start (imports) outlasts the default 30 s connect timeout; a nanny
    # that gave up would leave the batch waiting for a worker forever
    with dask.config.set({"distributed.scheduler.allowed-failures": 0, "distributed.scheduler.worker-saturation": 1.0,
                          "distributed.comm.timeouts.connect": "300s", "distributed.comm.timeouts.tcp": "300s"}):
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
        client = Client(cluster)
        try:
            spec = prepare(load_spec(cart_spec(seeds=[0, 1, 2, 3, 4], parameters={"controller": {"values": [
                "batch_helpers:push", "batch_helpers:die_always"]}})))
            rows = run_batch(spec, str(tmp_path / "out"), client=client).to_pylist()
        finally:
            client.close()
            cluster.close()
    assert len(rows) == 10
    dead = [r for r in rows if r["controller"] == "batch_helpers:die_always"]
    alive = [r for r in rows if r["controller"] == "batch_helpers:push"]
    assert all(r["status"] == "ok" for r in alive), [r["error"] for r in alive]
    assert all(r["status"] == "failed" and r["error"].startswith("KilledWorker") for r in dead), [r["error"] for r in dead]


def test_an_unreachable_scheduler_is_one_line_and_exit_status_2(tmp_path, capsys):
    import socket
    import yaml
    with socket.socket() as s:                  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec_path = tmp_path / "cart.yaml"
    spec_path.write_text(yaml.safe_dump(cart_spec(seeds=[0], parameters={})))
    status, out, err = run_cli(["batch", str(spec_path), "-o", str(tmp_path / "out"), "--quiet",
                                "--scheduler", f"tcp://127.0.0.1:{port}"], capsys)
    assert status == 2
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(f"mbsim: cannot reach the Dask scheduler at tcp://127.0.0.1:{port}")
