"""Spawning and deleting a model in a running session: the Bridge advertises the new model's
sensor topics and robot_description, publishes its joints and TF frames under its world names,
and unadvertises them again on delete; the first model's topics and frames never change."""
import time
from pathlib import Path

import numpy as np
import pytest
from capture_transport import Capture, ros_session
from lxml import etree

import mbsim_ros as mb
from mbsim_ros.run.config import load_config
from mbsim_ros.run import build_simulation

BUNDLED = Path(__file__).resolve().parents[2] / "mbsim_ros" / "data" / "models"


def wait_until(condition, runner, timeout=120.0):
    """Poll until condition() (the runner still running); a hang or a dead runner fails here."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert runner.running and time.monotonic() < deadline, "the runner stopped or took too long"
        time.sleep(0.005)


def frames(cap):
    out = set()
    for topic in ("/tf", "/tf_static"):
        for m in cap.got[topic]:
            out |= {t.child_frame_id for t in m.transforms}
    return out


def test_spawn_adds_a_robots_topics_frames_and_description_and_delete_takes_them_away():
    robot = mb.load_model(BUNDLED / "SR1.wrl")
    floor = mb.load_model(BUNDLED / "floor.wrl")
    config = load_config(None, dict(real_time_factor=0, tf_rate=1000.0, joint_state_rate=1000.0))
    sim = build_simulation([robot, floor], config)
    cap = Capture()
    session, _ = ros_session(sim, cap, config)
    before = set(cap._publishers)
    runner = session.runner
    runner.start()
    try:
        wait_until(lambda: sim.t >= 0.05, runner)
        name = session.spawn(robot, "robot2", pose=((1.5, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)))
        assert name == "robot2"
        t_spawn = sim.t
        wait_until(lambda: sim.t >= t_spawn + 0.05, runner)
        runner.pause(wait=True, timeout=30)
        topics = set(cap._publishers)
        assert {"/SR1/robot2/WaistGyro", "/SR1/robot2/robot_description", "/SR1/robot2/LeftCamera/image_raw"} <= topics
        assert before < topics
        urdf = etree.fromstring(cap.got["/SR1/robot2/robot_description"][-1].data.encode())
        assert "robot2/WAIST" in {l.get("name") for l in urdf.iter("link")}
        assert "robot2/RLEG_KNEE" in {j.get("name") for j in urdf.iter("joint")}
        js = cap.got["/SR1/joint_states"][-1]
        assert "RLEG_KNEE" in js.name and "robot2/RLEG_KNEE" in js.name
        assert {"WAIST", "robot2/WAIST", "robot2/WaistGyro"} <= frames(cap)
        tf_robot2 = [t for m in cap.got["/tf"][-5:] for t in m.transforms if t.child_frame_id == "robot2/WAIST"]
        assert tf_robot2 and tf_robot2[-1].transform.translation.x == pytest.approx(1.5, abs=0.01)
        assert cap.got["/SR1/robot2/WaistGyro"], "the spawned robot's gyro publishes"
        runner.resume()
        session.delete("robot2")
        runner.pause(wait=True, timeout=30)
        session.drain()             # the messages of the steps before the delete delivered
        n_gyro = len(cap.got["/SR1/robot2/WaistGyro"])
        t_delete = sim.t
        runner.resume()
        wait_until(lambda: sim.t >= t_delete + 0.05, runner)
        runner.pause(wait=True, timeout=30)
        session.drain()
        assert set(cap._publishers) == before
        assert len(cap.got["/SR1/robot2/WaistGyro"]) == n_gyro, "the deleted robot's gyro still publishes"
        assert "robot2/RLEG_KNEE" not in cap.got["/SR1/joint_states"][-1].name
        assert sim.model_names == ["SR1", "floor"]
        with pytest.raises(KeyError, match="no entity named 'robot2'"):
            session.delete("robot2")
    finally:
        runner.stop()
        runner.join(30)
        session.close()
    assert np.isfinite(sim.q).all()


def test_openhrps_floor_beside_sr1_publishes_its_waist_as_floor_waist():
    """Issue 19's world: SR1's frames and topics are what they are alone; the floor's link
    (WAIST too) is the static frame floor/WAIST under world, and its description names it so."""
    from mbsim_ros.ros.bridge import Bridge
    robot = mb.load_model(BUNDLED / "SR1.wrl")
    floor = mb.load_model(Path(__file__).resolve().parents[1] / "models" / "openhrp" / "openhrp_floor.wrl")
    config = load_config(None, {})
    sim = build_simulation([robot, floor], config)
    cap = Capture()
    Bridge(sim, cap, config).start()
    static = {(t.header.frame_id, t.child_frame_id) for m in cap.got["/tf_static"] for t in m.transforms}
    assert ("world", "floor/WAIST") in static
    moving = {(t.header.frame_id, t.child_frame_id) for m in cap.got["/tf"] for t in m.transforms}
    assert ("odom", "WAIST") in moving
    urdf = etree.fromstring(cap.got["/SR1/floor/robot_description"][-1].data.encode())
    # welded: its description hangs it from "world" as /tf_static does (Gazebo's convention)
    assert [l.get("name") for l in urdf.iter("link")] == ["world", "floor/WAIST"]
    weld = next(j for j in urdf.iter("joint") if j.find("child").get("link") == "floor/WAIST")
    assert weld.get("type") == "fixed" and weld.find("parent").get("link") == "world"
    placed = next(t.transform.translation for m in cap.got["/tf_static"] for t in m.transforms
                  if (t.header.frame_id, t.child_frame_id) == ("world", "floor/WAIST"))
    # the same double written as repr(float) and carried as float64 on the wire
    assert [float(x) for x in weld.find("origin").get("xyz").split()] == [placed.x, placed.y, placed.z]
    assert "/SR1/WaistGyro" in cap._publishers and "/SR1/robot_description" in cap._publishers


def test_unadvertise_reaches_every_transport_of_a_fanout():
    from mbsim_ros.ros import messages as m
    from mbsim_ros.ros.transport import FanoutTransport, NullTransport
    a, b = Capture(), NullTransport()
    fan = FanoutTransport([a, b])
    h = fan.advertise("/r/x", m.STRING)
    keep = fan.advertise("/r/y", m.STRING)
    fan.unadvertise(h)
    assert "/r/x" not in fan.stats() and "/r/x" not in a.stats() and "/r/x" not in b.stats()
    fan.publish(keep, m.string("still here"))
    assert a.got["/r/y"][0].data == "still here"
    fan.unadvertise(h)          # twice: nothing happens
