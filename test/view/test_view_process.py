"""ViewProcess: the live view served from a process of its own. The page's controls reach the
run's Session across the processes (a real browser presses them), snapshots cross intact, and
either process ending leaves the other in order: a killed view never stops the run, a killed
run never leaves a view process behind."""
import os
import signal
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from browser import button, dismiss_notifications, missing, play_then_pause, press, push_300_newtons, wait_for  # noqa: E402
from conftest import free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bundled_session(listeners, **settings):
    from mbsim_ros.run import Session, build_simulation, load_config, load_world
    config = load_config(None, {"real_time_factor": 1.0, **settings})
    models, _ = load_world(config)
    return Session(build_simulation(models, config), config, listeners=listeners)


def test_snapshot_parts_cross_a_socket_intact():
    """Arrays go as out-of-band buffers (contiguous, strided, float32, empty), the rest pickled."""
    from mbsim_ros.view.process import recv_parts, send_parts
    a, b = socket.socketpair()
    left, right = Connection(a.detach()), Connection(b.detach())
    rng = np.random.default_rng(0)
    big = rng.random((300, 400, 3))
    obj = dict(big=big, strided=big[::3, ::2, 1], f32=rng.random(7).astype(np.float32),
               empty=np.zeros((0, 3)), text="WAIST", n=3)
    import threading
    sender = threading.Thread(target=send_parts, args=(left, obj))      # larger than a socket buffer
    sender.start()
    got = recv_parts(right)
    sender.join()
    assert set(got) == set(obj) and got["text"] == "WAIST" and got["n"] == 3
    for key in ("big", "strided", "f32", "empty"):
        assert got[key].dtype == obj[key].dtype and np.array_equal(got[key], obj[key]), key
    left.close()
    with pytest.raises(EOFError):
        recv_parts(right)


def test_a_killed_view_process_leaves_the_run_going():
    from mbsim_ros.view.process import ViewProcess
    lines = []
    view = ViewProcess(port=free_port(), log=lines.append)
    session = bundled_session([view])
    try:
        session.start()
        wait_for(lambda: view.frames_sent > 3, "frames to reach the view's process")
        os.kill(view.pid, signal.SIGKILL)
        wait_for(lambda: any("its process ended" in line for line in lines), "the run to say the view ended")
        t0 = session.sim.t
        wait_for(lambda: session.sim.t > t0 + 0.2, "the run to go on")
        assert session.running
    finally:
        session.stop()
        session.join()
        started = time.monotonic()
        session.close()
    assert time.monotonic() - started < 30, "closing waited on the dead view"
    assert view.process.poll() is not None


def test_a_killed_run_leaves_no_view_process():
    """The run's process killed (SIGKILL: nothing of it runs after): the view's process reads
    the end of its socket and exits."""
    script = ("import sys; from mbsim_ros.view.process import ViewProcess; "
              f"v = ViewProcess(port={free_port()}); print(v.pid, flush=True); sys.stdin.read()")
    run = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True,
                           env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")))
    child = int(run.stdout.readline())
    assert _alive(child)
    run.kill()
    run.wait()
    wait_for(lambda: not _alive(child), "the view's process to exit", timeout=60)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"     # a zombie has exited
    except FileNotFoundError:
        return False


def test_a_port_in_use_is_a_view_error_and_no_process():
    from mbsim_ros.view.process import ViewProcess
    from mbsim_ros.view.server import ViewError
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        with pytest.raises(ViewError, match="already in use"):
            ViewProcess(port=taken.getsockname()[1])
    finally:
        taken.close()


def allowed_cores(tid):
    with open(f"/proc/{tid}/status") as f:
        text = next(line for line in f if line.startswith("Cpus_allowed_list:")).split(":")[1].strip()
    cores = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cores.update(range(int(lo), int(hi or lo) + 1))
    return cores


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a physics thread pinned to the only core leaves "
                    "the view nowhere else to go (this machine has one core)")
def test_a_pinned_physics_thread_keeps_the_views_process_and_threads_off_its_core():
    """The run's `cpu` K: every thread of the view's process, and the run's sender and calls
    threads, may run on the other cores only, never on K."""
    from mbsim_ros.view.process import ViewProcess
    cpu = min(os.sched_getaffinity(0))
    others = set(os.sched_getaffinity(0)) - {cpu}
    view = ViewProcess(port=free_port())
    session = bundled_session([view], cpu=cpu)
    try:
        child = [int(t) for t in os.listdir(f"/proc/{view.pid}/task")]
        assert child and all(allowed_cores(t) == others for t in child)
        for thread in (view._sender, view._answerer):
            wait_for(lambda: allowed_cores(thread.native_id) == others, f"{thread.name} off core {cpu}", 30.0)
        assert cpu in os.sched_getaffinity(0)           # the run's own other threads are left alone
    finally:
        session.close()


@pytest.fixture(scope="module")
def page():
    if missing() is not None:
        pytest.skip(str(missing()))
    from browser import browser
    from mbsim_ros.view.process import ViewProcess
    view = ViewProcess(port=free_port())
    session = bundled_session([view])
    session.pause()
    session.start()
    driver = browser()
    driver.get(view.url)
    wait_for(lambda: button(driver, "Play"), "the panel's Play button")
    dismiss_notifications(driver)
    yield dict(view=view, session=session, sim=session.sim, driver=driver)
    driver.quit()
    session.stop()
    session.join()
    session.close()


def test_play_and_pause_on_the_page_drive_the_run(page):
    sim, session, driver = page["sim"], page["session"], page["driver"]
    play_then_pause(driver, session, sim)
    session.pause(wait=True)
    t1 = sim.t
    time.sleep(1.0)
    assert sim.t == t1, "simulation time went on while paused"
    # the page shows the time it stopped at: the view's process asked the run for it
    wait_for(lambda: f"t = {t1:.3f} s" in driver.page_source and "(paused)" in driver.page_source,
             "the page to show the paused time")


def test_a_push_on_the_page_reaches_the_run_with_its_values(page):
    session, driver = page["session"], page["driver"]
    session.pause(wait=True)
    push_300_newtons(driver, session)


def test_a_run_closed_while_the_view_builds_its_page_closes_at_once():
    """The run ends (a SIGTERM at start) while the view's process still builds its page and
    asks the run for its state: nothing waits for an answer that never comes."""
    from mbsim_ros.view.process import CLOSE_TIMEOUT, ViewProcess
    view = ViewProcess(port=free_port())
    session = bundled_session([view])
    started = time.monotonic()
    session.close()
    assert time.monotonic() - started < 3 * CLOSE_TIMEOUT
    assert view.process.poll() is not None


IMAGE_MEANS = """
return [...document.querySelectorAll('img')].filter(i => i.complete && i.naturalWidth > 0).map(i => {
  const c = document.createElement('canvas');
  c.width = i.naturalWidth; c.height = i.naturalHeight;
  const x = c.getContext('2d');
  x.drawImage(i, 0, 0);
  const d = x.getImageData(0, 0, c.width, c.height).data;
  let s = 0;
  for (let k = 0; k < d.length; k += 4) s += d[k] + d[k + 1] + d[k + 2];
  return [c.width, c.height, s / (d.length / 4 * 3)];
});"""


def test_the_cameras_frames_reach_the_page(page):
    """The panel's camera images start black; after steps the page shows the cameras'
    frames (SR1's cameras see the floor: far from black), sent across from the run."""
    session, driver = page["session"], page["driver"]
    camera = next(s for m in page["sim"].models for s in m.sensors if s.name == "LeftCamera")
    width, height = int(camera.params.get("width", 320)), int(camera.params.get("height", 240))
    session.pause(wait=True)
    session.step(200, wait=True)
    session.resume()
    time.sleep(1.0)
    session.pause(wait=True)

    def camera_images():
        return [m for w, h, m in driver.execute_script(IMAGE_MEANS) if (w, h) == (width, height)]
    wait_for(lambda: sum(m > 20 for m in camera_images()) >= 2, "the cameras' frames on the page")


LINK_OPTIONS = "return [...document.querySelectorAll('[role=option]')].map(o => o.textContent)"


def test_a_model_spawned_from_the_page_reaches_the_run_and_the_pages_lists(page, tmp_path):
    """The page's Spawn loads the file in the view's process and hands the model to the run; the
    run's new world comes back across the processes: the page's link lists (Push, Follow link)
    name the new model's link."""
    from selenium.webdriver.common.by import By
    session, driver = page["session"], page["driver"]
    path = tmp_path / "crate.urdf"
    path.write_text('<robot name="crate"><link name="crate_body"><inertial><mass value="1"/>'
                    '<inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>'
                    '<visual><geometry><box size="0.2 0.2 0.2"/></geometry></visual></link></robot>')
    session.pause(wait=True)
    assert "crate_body" not in driver.execute_script(LINK_OPTIONS)
    folder = driver.find_element(By.XPATH, "//*[normalize-space(text())='Spawn']")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", folder)
    folder.click()                                                      # open the folder
    field = wait_for(lambda: next((e for e in driver.find_elements(
        By.XPATH, "//label[normalize-space(.)='Model file']/following::input[1]") if e.is_displayed()), None),
        "the spawn folder's Model file field")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", field)
    field.send_keys(f"{path}\n")
    press(driver, "Spawn")
    wait_for(lambda: "crate" in session.sim.entities, "the run to have the spawned model")
    wait_for(lambda: "Spawned" in driver.page_source, "the panel to say the model was spawned")
    # the view's process rebuilds its scene and lists from the world the run sent (slow on a busy machine)
    wait_for(lambda: driver.execute_script(LINK_OPTIONS).count("crate_body") == 2,
             "the page's Push and Follow link lists to name crate_body", timeout=300.0)


def test_the_views_process_shows_every_sensors_newest_reading_and_forgets_removed_sensors():
    """The run sends a sensor's reading only when it is new: each frame in the view's process
    carries the newest of every sensor, and a new world without a sensor drops its reading
    (a deleted model's camera image must not stay on the page)."""
    from types import SimpleNamespace
    from mbsim_ros.view.child import LatestReadings
    readings = LatestReadings()
    first = SimpleNamespace(readings={"imu": 1, "cam": 2})
    readings.fill(first)
    later = SimpleNamespace(readings={"imu": 3})
    readings.fill(later)
    assert later.readings == {"imu": 3, "cam": 2}
    readings.keep_sensors_of(SimpleNamespace(sensors=[("imu", None, 0)]))
    after_delete = SimpleNamespace(readings={})
    readings.fill(after_delete)
    assert after_delete.readings == {"imu": 3}
