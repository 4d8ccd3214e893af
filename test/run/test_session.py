"""run.Session without any ROS: listeners given at construction and the calls the view's buttons
make (pause, step, reset, push a link, set joint positions), checked against the laws of motion."""
import time

import numpy as np
import pytest

from mbsim_ros.model import Joint, Link, Model
from mbsim_ros.run import Session, load_config, build_simulation

DT = 0.001


def body(mass=2.0, inertia=(0.1, 0.2, 0.25)):
    """One free body, no gravity, its center of mass at its origin."""
    m = Model("body", gravity=(0, 0, 0))
    m.add_link(Link("box", mass, [0, 0, 0], np.diag(inertia)))
    m.add_joint(Joint("float", "free", None, "box"))
    return m.finalize()


def hinge():
    m = Model("hinge", gravity=(0, 0, 0))
    m.add_link(Link("arm", 1.0, [0, 0, 0], np.diag([0.1, 0.1, 0.5])))
    m.add_joint(Joint("j", "revolute", None, "arm", axis=(0, 0, 1)))
    return m.finalize()


def config(**settings):
    return load_config(None, dict(dict(contact="none", hold=0, dt=DT, real_time_factor=0), **settings))


class Recorder:
    """A listener recording which of its methods were called, in order."""

    def __init__(self):
        self.calls = []

    def start(self, session):
        self.calls.append(("start", session))

    def on_step(self, sim):
        self.calls.append(("on_step", round(sim.t / DT)))

    def on_reset(self, sim):
        self.calls.append(("on_reset", sim.t))

    def on_world_changed(self, sim):
        self.calls.append(("on_world_changed", tuple(sim.model_names)))

    def close(self):
        self.calls.append(("close",))


class OnlySteps:
    def __init__(self):
        self.steps = 0

    def on_step(self, sim):
        self.steps += 1


def test_listeners_hear_every_step_reset_world_change_and_the_close():
    c = config()
    sim = build_simulation([hinge()], c)
    rec, steps = Recorder(), OnlySteps()
    session = Session(sim, c, listeners=[rec, steps])      # OnlySteps has no start/close: skipped
    assert rec.calls == [("start", session)]
    session.run(0.005)
    assert rec.calls[1:] == [("on_step", k) for k in range(1, 6)] and steps.steps == 5
    session.reset()
    assert rec.calls[-1] == ("on_reset", 0.0) and sim.t == 0.0
    name = session.spawn(body(), name="b2")
    assert name == "b2" and rec.calls[-1] == ("on_world_changed", ("hinge", "b2"))
    session.delete("b2")
    assert rec.calls[-1] == ("on_world_changed", ("hinge",))
    session.close()
    assert rec.calls[-1] == ("close",)


def test_pause_at_pauses_there_and_resume_goes_on():
    c = config()
    sim = build_simulation([hinge()], c)
    session = Session(sim, c, pause_at=0.02)
    session.start()
    try:
        deadline = time.monotonic() + 60
        while not (session.paused and session.pause(wait=True, timeout=1)) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert session.paused and sim.t == pytest.approx(0.02, abs=1e-12)
        assert session.step(3, wait=True, timeout=10)
        assert sim.t == pytest.approx(0.023, abs=1e-12) and session.paused and session.running
    finally:
        session.stop()
        session.join(10)
        session.close()
    stats = session.stats()
    assert {"real_time_factor", "steps", "overruns", "lateness_p50_ms", "lateness_p99_ms"} <= set(stats)
    assert stats["steps"] == 23


@pytest.mark.parametrize("yaw", [0.0, np.pi / 2])
def test_a_push_changes_momentum_by_force_times_duration(yaw):
    """A world-frame force F for d seconds on a free body at rest (no gravity, the force at its
    center of mass) leaves it moving at F d / m, without turning; a torque T about a principal
    axis spins it up to T d / I. Exact up to rounding: the force is constant over each step. The
    body's model placed turned (yaw) checks that the push is in the world frame."""
    c = config()
    m = body()
    sim = build_simulation([m], c)
    if yaw:
        sim.set_model_pose("body", ((0.0, 0.0, 0.0), (0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2))))
    session = Session(sim, c)
    session.apply_wrench("box", (4.0, -2.0, 0.0), (0.0, 0.0, 0.0), duration=0.1)
    session.run(0.2)                       # 0.1 s pushed, 0.1 s coasting
    twist = sim.link_twist("box")
    assert twist[:3] == pytest.approx([4.0 * 0.1 / 2.0, -2.0 * 0.1 / 2.0, 0.0], abs=1e-12)
    assert twist[3:] == pytest.approx([0, 0, 0], abs=1e-12)
    session.apply_wrench("box", (0.0, 0.0, 0.0), (0.0, 0.0, 0.5), duration=0.05)
    session.run(0.1)
    assert sim.link_twist("box")[3:] == pytest.approx([0, 0, 0.5 * 0.05 / 0.25], abs=1e-12)
    assert not sim.tau.any()               # the pushes are over: nothing of them left in tau
    with pytest.raises(KeyError):
        session.apply_wrench("no_such_link", (1, 0, 0), (0, 0, 0), 0.1)
    with pytest.raises(ValueError):
        session.apply_wrench("box", (np.nan, 0, 0), (0, 0, 0), 0.1)
    session.close()


def test_a_push_on_a_hinged_link_is_its_torque_about_the_axis():
    """A torque on the arm about the hinge's axis (z) turns it as a joint effort would: the
    generalized force is the torque's z component; the x and y components do no work."""
    c = config()
    sim = build_simulation([hinge()], c)
    session = Session(sim, c)
    session.apply_wrench("arm", (0.0, 0.0, 0.0), (3.0, -1.0, 0.25), duration=0.01)
    session.run(0.01)
    assert sim.v[0] == pytest.approx(0.25 * 0.01 / 0.5, abs=1e-12)
    session.close()


def test_set_joint_positions_moves_joints_at_rest_and_tells_the_listeners():
    c = config(pd_gains={"default": [50.0, 5.0]}, command_interfaces={"j": ["position"]})
    sim = build_simulation([hinge()], c)
    rec = Recorder()
    session = Session(sim, c, listeners=[rec])
    sim.v[0] = 1.0
    session.set_joint_positions({"j": 0.7})
    assert sim.q[0] == 0.7 and sim.v[0] == 0.0
    assert rec.calls[-1] == ("on_step", 0)            # the new state, no step taken
    assert session.controller.q_target[0] == 0.7      # the position target moved with it: held there
    session.run(0.2)
    assert sim.q[0] == pytest.approx(0.7, abs=1e-9)
    with pytest.raises(KeyError):
        session.set_joint_positions({"no_such_joint": 0.1})
    session.close()


def test_joint_commands_are_plain_calls_and_bad_ones_are_reported():
    c = config(pd_gains={"default": [0.0, 0.0]})
    sim = build_simulation([hinge()], c)
    notes = []
    session = Session(sim, c, log=notes.append)
    session.command_joints(["j"], effort=[0.5])
    session.run(0.01)
    # the controller sets tau after each step, as a node's commands act: from the second step on
    assert sim.v[0] == pytest.approx(0.5 * 0.009 / 0.5, abs=1e-12)
    session.command_joints(["nope"], effort=[1.0])
    assert notes == ["joint_commands: unknown joint(s) nope"]
    session.set_joint_efforts([1.0, 2.0])
    assert "expected 1 values" in notes[-1]
    session.close()


def test_steps_taken_while_paused_render_every_camera_frame_due_in_them(monkeypatch):
    """A paced run skips a camera frame while the previous one still renders (the step never
    waits); steps granted while paused have no deadline, so there every frame due is rendered
    and the camera's newest frame is that of the last step, however slow the renderer."""
    from mbsim_ros.run import load_world
    from mbsim_ros.sensors.optical import OpticalWorker
    c = load_config(None, {"real_time_factor": 1.0})
    sim = build_simulation(load_world(c)[0], c)
    session = Session(sim, c)
    slow = OpticalWorker._work

    def render_slowly(worker):
        set_poses = worker.scene.set_link_poses
        worker.scene.set_link_poses = lambda R, p: (time.sleep(0.02), set_poses(R, p))
        slow(worker)
    try:
        sim.render_in_thread(False)
        monkeypatch.setattr(OpticalWorker, "_work", render_slowly)
        sim.render_in_thread(True)
        session.step(100)                    # frames due at 0, 1/30, 2/30, 3/30 s
        session.drain()
        frame = sim.readings()["LeftCamera"]
        assert sim.optical_worker.skipped["LeftCamera"] == 0
        assert frame.stamp == pytest.approx(0.1, abs=1e-9)
    finally:
        session.close()
