"""ros2_control through topics: the message sequences joint_state_topic_hardware_interface (and
PickNik's topic_based_ros2_control before it) sends on the command topic, applied to three
independent joints commanded through position, velocity and effort; the state topic they read.

The hardware interface's write(): name = every joint of its <ros2_control> block; position,
velocity and effort get one value per joint that has that command interface, in joint order
(so a mixed robot sends arrays shorter than name). topic_based_ros2_control sent full arrays
with 0 for the interfaces a joint lacks. Its read() takes position[i] (and velocity, effort when
not empty) for each name it knows, from a JointState on the state topic."""
import numpy as np
import pytest
from capture_transport import Capture, bridge_on, steps

from mbsim_ros.model import ConfigError, Joint, Link, Model
from mbsim_ros.ros import messages as msg
from mbsim_ros.ros.bridge import Bridge
from mbsim_ros.run.config import load_config
from mbsim_ros.run import Session, build_simulation

DT = 0.001
INERTIA = 0.5          # about each hinge (Izz at the hinge, the com on the axis)
KP = 20.0
KD = 2.0 * np.sqrt(KP * INERTIA)     # critically damped about each hinge
INTERFACES = {"arm": ["position"], "wheel": ["velocity"], "spinner": ["effort"]}


def rig():
    """Three bodies, each hinged to the world about z, no gravity: their dynamics are decoupled,
    each joint's acceleration is its torque over INERTIA."""
    m = Model("rig", gravity=(0, 0, 0))
    for name in INTERFACES:
        m.add_link(Link(name + "_link", 1.0, [0, 0, 0], np.diag([0.1, 0.1, INERTIA])))
        m.add_joint(Joint(name, "revolute", None, name + "_link", axis=(0, 0, 1)))
    return m.finalize()


def started(**settings):
    return bridge_on([rig()], load_config(None, dict(dict(contact="none", hold=0, dt=DT, pd_gains={"default": [KP, KD]},
                                                          joint_state_rate=1000.0), **settings)))


def q_of(sim, name):
    return sim.q[sim.model_slices("rig")[0]][list(INTERFACES).index(name)]


def v_of(sim, name):
    return sim.v[list(INTERFACES).index(name)]


def check_mixed(sim, bridge, send):
    """send() delivers the command; then: the arm settles at 0.4 rad (PD, critically damped:
    the error left after 3 s is 0.4 (1 + w t) e^(-w t) = 1e-7 rad, w = sqrt(kp / I)), the wheel at
    3 rad/s (time constant I / kd = 0.08 s; 3 s are 38 of them),
    the spinner accelerates at effort / I exactly (semi-implicit Euler adds dt * qdd a step)."""
    send()
    steps(sim, bridge, 1)                  # the bridge sets tau after a step, for the next ones
    v0 = v_of(sim, "spinner")
    steps(sim, bridge, 3000)
    assert q_of(sim, "arm") == pytest.approx(0.4, abs=1e-6)
    assert v_of(sim, "wheel") == pytest.approx(3.0, abs=1e-6)
    assert (v_of(sim, "spinner") - v0) / (3000 * DT) == pytest.approx(0.7 / INERTIA, rel=1e-9)
    assert bridge.errors == []


def test_joint_state_topic_hardware_interface_layout_mixed_joints():
    """name = all three joints, one value per joint having the interface (shorter arrays)."""
    sim, bridge, t = started(command_interfaces=INTERFACES)
    names = list(INTERFACES)
    check_mixed(sim, bridge, lambda: t.deliver("/rig/joint_commands", msg.joint_state(
        0.0, names, position=[0.4], velocity=[3.0], effort=[0.7])))


def test_full_arrays_with_nan_for_what_a_joint_is_not_commanded_through():
    sim, bridge, t = started()
    nan = float("nan")
    check_mixed(sim, bridge, lambda: t.deliver("/rig/joint_commands", msg.joint_state(
        0.0, list(INTERFACES), position=[0.4, nan, nan], velocity=[nan, 3.0, nan], effort=[nan, nan, 0.7])))


def test_topic_based_ros2_control_layout_full_arrays_with_zeros():
    """PickNik's plugin sends 0 where a joint lacks an interface: command_interfaces picks."""
    sim, bridge, t = started(command_interfaces=INTERFACES)
    check_mixed(sim, bridge, lambda: t.deliver("/rig/joint_commands", msg.joint_state(
        0.0, list(INTERFACES), position=[0.4, 0.0, 0.0], velocity=[0.0, 3.0, 0.0], effort=[0.0, 0.0, 0.7])))


def test_a_stream_of_commands_like_the_controller_manager_sends():
    """At 100 Hz (every 10 steps) the position target ramps 0 -> 0.5 rad over 1 s (what a
    joint_trajectory_controller would do); the arm follows the ramp with the PD's lag and ends
    within 1e-4 rad of 0.5 rad after 2 s more; the state topic carries every joint each step."""
    sim, bridge, t = started(command_interfaces=INTERFACES)
    for k in range(100):
        t.deliver("/rig/joint_commands", msg.joint_state(
            0.0, list(INTERFACES), position=[0.005 * (k + 1)], velocity=[0.0], effort=[0.0]))
        steps(sim, bridge, 10)
    steps(sim, bridge, 2000)
    # the lag at the ramp's end, 2 / w * 0.5 rad/s = 0.16 rad, decays by (1 + w t) e^(-w t) = 5e-5 in 2 s
    assert q_of(sim, "arm") == pytest.approx(0.5, abs=1e-4)
    states = t.got["/rig/joint_states"]
    last = states[-1]
    assert list(last.name) == list(INTERFACES)
    assert len(last.position) == len(last.velocity) == len(last.effort) == 3
    np.testing.assert_array_equal(last.position, sim.q[:3])
    np.testing.assert_array_equal(last.velocity, sim.v[:3])
    t.deliver("/rig/joint_commands", msg.joint_state(0.0, list(INTERFACES), position=[0.5], velocity=[0.0],
                                                     effort=[0.7]))
    steps(sim, bridge, 2)      # tau is set after the first step; the second applies and publishes it
    assert t.got["/rig/joint_states"][-1].effort[2] == 0.7


def test_not_commanded_keeps_what_was_commanded():
    """Empty arrays and NaN leave an interface as it was (ros2_control sends NaN until a
    controller writes a command interface)."""
    sim, bridge, t = started()
    names = list(INTERFACES)
    t.deliver("/rig/joint_commands", msg.joint_state(0.0, names, position=[0.4, 0.1, 0.2]))
    steps(sim, bridge, 10)
    t.deliver("/rig/joint_commands", msg.joint_state(0.0, names, effort=[0.0, 0.0, 1.0]))
    c = bridge.session.controller
    np.testing.assert_array_equal(c.q_target[:3], [0.4, 0.1, 0.2])
    nan = float("nan")
    t.deliver("/rig/joint_commands", msg.joint_state(0.0, names, position=[0.3, nan, nan], effort=[nan] * 3))
    np.testing.assert_array_equal(c.q_target[:3], [0.3, 0.1, 0.2])
    assert c.effort[2] == 1.0


def test_a_position_joint_holds_its_initial_position_until_commanded():
    """With command_interfaces, the arm's PD holds q0 (here 0.25 rad, set before the bridge
    starts) while only NaN commands arrive: a robot stands while its controllers start."""
    config = load_config(None, dict(contact="none", hold=0, dt=DT, pd_gains={"default": [KP, KD]},
                                    command_interfaces=INTERFACES))
    sim = build_simulation([rig()], config)
    sim.q[0] = 0.25
    t = Capture()
    bridge = Bridge(sim, t, config)
    Session(sim, config.replace(real_time_factor=0.0), listeners=[bridge])
    sim.v[0] = 1.0                                  # a push: the PD brings it back
    nan = float("nan")
    t.deliver("/rig/joint_commands", msg.joint_state(0.0, list(INTERFACES), position=[nan], velocity=[nan], effort=[nan]))
    steps(sim, bridge, 3000)
    assert q_of(sim, "arm") == pytest.approx(0.25, abs=1e-6)


def test_bad_commands_are_reported_and_ignored():
    sim, bridge, t = started()
    t.deliver("/rig/joint_commands", msg.joint_state(0.0, list(INTERFACES), position=[0.4]))
    assert "1 position value(s) for 3 names" in bridge.errors[-1] and "command_interfaces" in bridge.errors[-1]
    t.deliver("/rig/joint_commands", msg.joint_state(0.0, ["arm"], effort=[float("inf")]))
    assert "finite or NaN" in bridge.errors[-1]
    assert bridge.session.controller.effort[0] == 0.0


def test_topic_names_are_configurable():
    sim, bridge, t = started(joint_commands_topic="/robot_joint_commands", joint_states_topic="/robot_joint_states")
    assert "/robot_joint_commands" in t.callbacks and "/rig/joint_commands" not in t.callbacks
    steps(sim, bridge, 2)
    assert t.got["/robot_joint_states"] and not t.got.get("/rig/joint_states")
    t.deliver("/robot_joint_commands", msg.joint_state(0.0, ["spinner"], effort=[0.5]))
    assert bridge.session.controller.effort[2] == 0.5


def test_command_interfaces_config_is_checked():
    with pytest.raises(ConfigError, match="command_interfaces.arm must be a list of position, velocity, effort"):
        load_config(None, dict(command_interfaces={"arm": ["torque"]}))


# -- the worked example: config/ros2_control.yaml, config/ros2_control_sim.yaml, the launch file --
REPO = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_the_ros2_control_block_for_the_bundled_robot(tmp_path):
    """The description the launch file hands controller_manager: our URDF plus a <ros2_control>
    block naming joint_state_topic_hardware_interface, its two topics, and every SR1 joint with
    the sim config's command interfaces and the three state interfaces; the controllers' joints
    are among them; the URDF with the block still loads (our URDF reader ignores the block)."""
    import yaml
    from lxml import etree

    import mbsim_ros as mb
    from mbsim_ros.ros.ros2_control import PLUGIN, moving_joints, ros2_control_block, with_ros2_control
    sim_config = load_config(REPO / "config" / "ros2_control_sim.yaml")
    model = mb.load_model(REPO / "mbsim_ros" / "data" / "models" / "SR1.wrl")
    assert sorted(sim_config.command_interfaces) == sorted(moving_joints(model))
    urdf = with_ros2_control(mb.to_urdf(model), ros2_control_block(
        sim_config.command_interfaces, "/SR1/joint_commands", "/SR1/joint_states"))
    root = etree.fromstring(urdf.encode())
    block = root.find("ros2_control")
    assert block.find("hardware/plugin").text == PLUGIN
    params = {p.get("name"): p.text for p in block.findall("hardware/param")}
    assert params == {"joint_commands_topic": "/SR1/joint_commands", "joint_states_topic": "/SR1/joint_states"}
    joints = {j.get("name"): j for j in block.findall("joint")}
    assert set(joints) == set(moving_joints(model))
    for j in joints.values():
        assert [c.get("name") for c in j.findall("command_interface")] == ["position"]
        assert [s.get("name") for s in j.findall("state_interface")] == ["position", "velocity", "effort"]
    controllers = yaml.safe_load((REPO / "config" / "ros2_control.yaml").read_text())
    arm = controllers["right_arm_controller"]["ros__parameters"]
    assert set(arm["joints"]) <= set(joints) and arm["command_interfaces"] == ["position"]
    path = tmp_path / "sr1_ros2_control.urdf"
    path.write_text(urdf)
    assert set(moving_joints(mb.load_model(path))) == set(joints)
