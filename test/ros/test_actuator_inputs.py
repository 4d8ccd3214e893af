"""Actuator controls and run-time inputs from topics (NS/actuator_controls, NS/inputs), through the
Bridge on a transport that delivers what a test hands it and on live DDS between two transports
(applied between steps by the runner); the actuator switch; model settings (time_step, end_time,
contact method) as the run's dt, duration and contact unless the user gave them."""
import random
import time
from pathlib import Path

import numpy as np
import pytest
from capture_transport import Capture, bridge_on, ros_session, steps

from mbsim_ros.cli import main
from mbsim_ros.model import Actuator, BodyLoad, ConfigError, Function, Joint, Link, Model
from mbsim_ros.ros import messages as msg
from mbsim_ros.run.config import load_config
from mbsim_ros.ros.parameters import config_from_parameters
from mbsim_ros.run import build_simulation
from mbsim_ros.run.world import apply_model_settings

GAIN = 40.0                     # N m per unit control
INERTIA = 0.5 + 2.0 * 0.2 ** 2  # about the hinge: Izz 0.5 at the com + m r^2 (2 kg at 0.2 m)
PUSH, CART = 3.0, 4.0           # N of the input-modulated load at input 1, kg of the cart
DT = 0.001




def rig(actuated=True, settings=None):
    """A hinge with a coordinate actuator and a cart pushed by a load scaled by input 'u'; no
    gravity, so each joint's acceleration is its applied force over its inertia alone."""
    m = Model("rig", gravity=(0, 0, 0))
    m.add_link(Link("arm", 2.0, [0.2, 0, 0], np.diag([0.1, 0.3, 0.5])))
    m.add_joint(Joint("hinge", "revolute", None, "arm", axis=(0, 0, 1)))
    m.add_link(Link("cart", CART, [0, 0, 0], np.eye(3) * 0.1))
    m.add_joint(Joint("slide", "prismatic", None, "cart", axis=(1, 0, 0)))
    if actuated:
        m.actuators.append(Actuator("motor", "coordinate", gain=GAIN, dof="hinge"))
        m.loads.append(BodyLoad("push", "cart", "force", np.array([PUSH, 0, 0]), modulation=Function.input("u")))
    if settings is not None:
        m.settings = settings
    return m.finalize()


def started(model=None, **settings):
    return bridge_on([model or rig()], load_config(None, dict(contact="none", **settings)))


def controls(names, values):
    return msg.joint_state(0.0, names, effort=values)


def inputs(names, values):
    return msg.joint_state(0.0, names, position=values)


# -- the topics ----------------------------------------------------------------------------------
def test_a_control_message_accelerates_the_joint_by_gain_times_control_over_inertia():
    sim, bridge, t = started()
    steps(sim, bridge, 10)
    assert sim.v[0] == 0.0                                   # control 0 until a message
    t.deliver("/rig/actuator_controls", controls(["motor"], [0.25]))
    v0 = sim.v[0]
    steps(sim, bridge, 100)
    # semi-implicit Euler adds dt * qdd each step; qdd = gain u / I exactly (no other force):
    # equal up to the rounding of 100 additions
    assert (sim.v[0] - v0) / (100 * DT) == pytest.approx(GAIN * 0.25 / INERTIA, rel=1e-12)
    assert sim.v[1] == 0.0                                    # input 'u' still 0
    state = t.got["/rig/actuator_controls/state"]
    assert list(state[-1].name) == ["motor"] and list(state[-1].effort) == [0.25]
    assert list(state[0].effort) == [0.0]                    # published from the start, at joint_state_rate
    assert len(state) == len(t.got["/rig/joint_states"])
    assert bridge.errors == []


def test_an_input_function_follows_the_inputs_topic():
    sim, bridge, t = started()
    for u in (0.5, -1.0, 0.0):
        t.deliver("/rig/inputs", inputs(["u"], [u]))
        v0 = sim.v[1]
        steps(sim, bridge, 50)
        # the load's force PUSH u along the slide on the cart's mass, exact up to rounding
        assert (sim.v[1] - v0) / (50 * DT) == pytest.approx(PUSH * u / CART, rel=1e-12, abs=1e-12)
    assert sim.v[0] == 0.0 and bridge.errors == []


def test_unknown_names_and_bad_values_are_reported_once_and_the_rest_applied():
    log = []
    sim, bridge, t = started()
    bridge.log = log.append
    for _ in range(3):
        t.deliver("/rig/actuator_controls", controls(["nope", "motor"], [1.0, 0.5]))
        t.deliver("/rig/actuator_controls", controls(["motor"], [0.1, 0.2]))
        t.deliver("/rig/inputs", inputs(["u", "v"], [float("nan"), 2.0]))
    np.testing.assert_array_equal(sim.controls, [0.5])       # the known name applied each time
    assert log == bridge.errors
    assert log == [
        "actuator_controls: no actuator named 'nope' (ignored); expected one of motor",
        "actuator_controls: expected one effort per name, got 1 names and 2 effort values; message ignored",
        "inputs: u = nan is not a finite number (ignored)",
        "inputs: no input named 'v' (ignored); expected one of u"]
    steps(sim, bridge, 1)
    assert np.all(np.isfinite(sim.v))


def test_a_world_without_actuators_or_inputs_has_neither_topic():
    sim, bridge, t = started(rig(actuated=False))
    stats = t.stats()
    assert not any("actuator_controls" in k or k.endswith("/inputs") for k in stats)
    assert "/rig/joint_commands" in stats


def test_actuators_switched_off_by_the_configuration_stay_off_after_a_reset():
    config = load_config(None, dict(contact="none", actuators_enabled=False, real_time_factor=0))
    sim = build_simulation([rig()], config)
    t = Capture()
    session, _ = ros_session(sim, t, config)
    assert sim.actuators_enabled is False
    t.deliver("/rig/actuator_controls", controls(["motor"], [1.0]))
    session.run(0.05)
    assert sim.v[0] == 0.0 and list(sim.controls) == [1.0]    # the control is kept, not applied
    session.reset()                                           # sim.reset alone turns them on
    assert sim.t == 0.0 and sim.actuators_enabled is False
    values = {kv.key: kv.value for kv in t.got["/diagnostics"][-1].status[0].values}
    assert values["actuators_enabled"] == "false"
    session.close()


# -- live DDS: another process's view, applied between steps by the runner -----------------------
def test_controls_and_inputs_over_dds_reach_a_running_session():
    pytest.importorskip("cyclonedds", reason="cyclonedds (python) not installed")
    from mbsim_ros.ros.dds import DdsTransport
    loopback = (Path(__file__).resolve().parent / "cyclonedds-localhost.xml").as_uri()
    env = {"ROS_DOMAIN_ID": str(random.SystemRandom().randint(201, 230)), "CYCLONEDDS_URI": loopback}
    config = load_config(None, dict(contact="none", real_time_factor=1.0))
    sim = build_simulation([rig()], config)
    with DdsTransport(env=env) as peer:
        session, bridge = ros_session(sim, DdsTransport(env=env), config)
        runner = session.runner
        state = []
        peer.subscribe("/rig/actuator_controls/state", msg.JOINT_STATE,
                       lambda data: state.append(msg.decode_joint_state(data)))
        pubs = {name: peer.advertise(f"/rig/{name}", msg.JOINT_STATE) for name in ("actuator_controls", "inputs")}
        runner.start()
        try:
            for p in pubs.values():
                assert peer.wait_for_subscribers(p, 1, timeout=10), p.topic
            deadline = time.monotonic() + 10
            while (list(sim.controls) != [0.25] or sim.v[1] == 0.0) and time.monotonic() < deadline:
                peer.publish(pubs["actuator_controls"], controls(["motor"], [0.25]))
                peer.publish(pubs["inputs"], inputs(["u"], [0.5]))
                time.sleep(0.05)
            assert list(sim.controls) == [0.25] and sim.v[1] > 0.0, "no controls or inputs arrived"
            assert runner.pause(wait=True, timeout=10)
            v0 = sim.v.copy()
            assert runner.step_once(200, wait=True, timeout=10)
            # exact up to the rounding of 200 additions (the values were set between steps)
            qdd = (sim.v - v0) / (200 * DT)
            assert qdd == pytest.approx([GAIN * 0.25 / INERTIA, PUSH * 0.5 / CART], rel=1e-12)
            deadline = time.monotonic() + 10
            while not any(list(s.effort) == [0.25] for s in state) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert any(s.names == ["motor"] and list(s.effort) == [0.25] for s in state)
        finally:
            runner.stop()
            runner.join(timeout=10)
            session.close()
    assert bridge.errors == []


# -- model settings --------------------------------------------------------------------------------
SETTINGS = dict(time_step=0.002, end_time=0.3, enforce_realtime=None, contact_method=None,
                integrator=None, solver=None, gravity=None, files=None)


def test_model_settings_fill_what_the_configuration_leaves_open():
    model = rig(settings=SETTINGS)
    model.contact_method = "penalty"
    config = load_config()
    notes = apply_model_settings(config, [model])
    assert (config.dt, config.duration, config.contact) == (0.002, 0.3, "penalty")
    assert notes == ["dt 0.002 s: model rig's time_step", "duration 0.3 s: model rig's end_time",
                     "contact penalty: model rig's contact method"]
    assert build_simulation([model], config).dt == 0.002
    config = load_config(None, dict(dt=0.001, duration=1.0, contact="lcp"))
    notes = apply_model_settings(config, [model])
    assert (config.dt, config.duration, config.contact) == (0.001, 1.0, "lcp")
    assert notes == ["dt 0.001 s as given (model rig's time_step 0.002 s not used)",
                     "duration 1.0 s as given (model rig's end_time 0.3 s not used)",
                     "contact lcp as given (model rig's contact method penalty not used)"]
    config = load_config()                                  # a model without settings
    assert apply_model_settings(config, [rig()]) == []
    assert (config.dt, config.duration, config.contact) == (0.001, None, "lcp")


@pytest.mark.parametrize("args, dt, duration, note", [
    ([], 0.002, 0.3, "note: dt 0.002 s: model rig's time_step"),
    (["--dt", "0.001", "--duration", "0.1"], 0.001, 0.1, "note: dt 0.001 s as given (model rig's time_step 0.002 s not used)"),
])
def test_mbsim_run_takes_the_models_time_step_and_end_time_unless_given(monkeypatch, capsys, args, dt, duration, note):
    from mbsim_ros.run import world
    monkeypatch.setattr(world, "load_models", lambda paths, floating_base=None, z_up=False, *a, **kw:
                        ([rig(settings=SETTINGS)], []))
    assert main(["run", *args, "--transport", "none", "--rtf", "0", "--hold", "0", "--quiet"]) == 0
    out, err = capsys.readouterr()
    n = int(round(duration / dt))
    assert f"dt = {dt:g} s" in out and f"{duration:g} s ({n} steps)" in out and f"steps: {n} " in out
    assert note in err.splitlines()


def test_the_node_pauses_at_the_duration_and_goes_on_when_resumed():
    config = load_config(None, dict(contact="none", real_time_factor=0))
    sim = build_simulation([rig()], config)
    session, _ = ros_session(sim, Capture(), config, pause_at=0.05)
    runner = session.runner
    runner.start()
    try:
        deadline = time.monotonic() + 30
        while not runner.paused and time.monotonic() < deadline:
            time.sleep(0.01)
        assert runner.pause(wait=True, timeout=10)
        assert sim.t == pytest.approx(0.05, abs=1e-9)     # the 50th step, no later
        runner.resume()
        while sim.t < 0.07 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sim.t >= 0.07
    finally:
        runner.stop()
        runner.join(timeout=10)
        session.close()


def test_the_node_dt_parameter_left_at_its_default_leaves_dt_to_the_model():
    values = {"model": "", "config": "", "dt": 0.001, "real_time_factor": 1.0, "catch_up": "compensatory",
              "seed": 0, "frame_prefix": "", "joint_state_rate": 100.0, "tf_rate": 100.0, "hold": 2000.0}
    assert config_from_parameters(values, "/").dt is None
    assert config_from_parameters(dict(values, dt=0.004), "/").dt == 0.004


@pytest.mark.parametrize("settings, message", [
    ({"dt": 0}, "dt must be a finite number > 0"),
    ({"duration": -1.0}, "duration must be a finite number > 0"),
    ({"contact": "smc"}, "contact must be one of lcp, penalty, none (or \"\" for the model's)"),
    ({"actuators_enabled": "yes"}, "actuators_enabled must be true or false"),
])
def test_bad_settings_are_config_errors(settings, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(None, settings)
