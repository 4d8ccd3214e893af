"""Joint commands from a real controller board over a serial port (commands:): csv lines on a
pseudo-terminal drive the bundled SR1's joints through the same path as NS/joint_commands."""
import numpy as np
import pytest
from harness import status, world
from ptys import PtyDevice, wait_for

from mbsim_ros.ros import messages as msg

JOINTS = ["RARM_SHOULDER_P", "RARM_ELBOW"]
# stiff enough to pull against the hold springs (2000 N m/rad) that keep the pose; explicit PD
# stays stable at dt = 1 ms for the arm's inertia
GAINS = {"RARM_SHOULDER_P": [20000.0, 50.0], "RARM_ELBOW": [20000.0, 50.0]}


def run(sim, bridge, steps):
    bridge.session.step(steps)


def test_position_commands_from_a_pty_move_the_joints_as_joint_commands_do(tmp_path):
    port = tmp_path / "board"
    pty = PtyDevice(port)
    entry = {"port": str(port), "joints": JOINTS, "mode": "position", "scale": [1.0, 0.001]}   # elbow in mrad
    sim, bridge, cap = world(commands=entry, pd_gains=GAINS)
    reader = bridge.hil.readers[0]
    try:
        wait_for(lambda: reader.link.connected, what="the node to open the pty")
        iq = [bridge.dof_q[bridge.dof_names.index(j)] for j in JOINTS]
        q0 = sim.q[iq].copy()
        target = q0 + [-0.6, 0.5]
        pty.write(b"%r,%r\n" % (float(target[0]), float(target[1] * 1000)))
        wait_for(lambda: reader.commands == 1, what="the command")
        run(sim, bridge, 1000)
        q = sim.q[iq].copy()
        # the PD pulls against the hold springs: equilibrium at kp / (kp + 2000) = 91 % of the way
        assert np.all(np.abs(q - q0) > 0.8 * np.abs(target - q0))
        np.testing.assert_allclose(reader.last_values, target, rtol=1e-12)     # mrad * 0.001: rounding only
        # the same command through NS/joint_commands gives the same motion, bit for bit
        sim2, bridge2, _ = world(pd_gains=GAINS)
        bridge2.inputs._on_joint_commands(msg.joint_state(0.0, JOINTS, position=reader.last_values))
        run(sim2, bridge2, 1000)
        np.testing.assert_array_equal(sim2.q, sim.q)
    finally:
        bridge.close()
        pty.close()


def test_effort_commands_and_bad_lines_are_counted(tmp_path):
    port = tmp_path / "board"
    pty = PtyDevice(port)
    sim, bridge, cap = world(commands={"port": str(port), "joints": ["RARM_ELBOW"], "mode": "effort"})
    reader = bridge.hil.readers[0]
    try:
        wait_for(lambda: reader.link.connected, what="the node to open the pty")
        pty.write(b"1.5\n\xff\xfe\n1,2\nnan\n2.5\r\n")
        iv = bridge.dof_v[bridge.dof_names.index("RARM_ELBOW")]
        # the last line applied, not only counted (a line is counted before it is handled)
        wait_for(lambda: reader.lines == 5 and bridge.session.controller.effort[iv] == 2.5, what="five lines, the last applied")
        run(sim, bridge, 1)
        assert sim.tau[bridge.dof_v[bridge.dof_names.index("RARM_ELBOW")]] == pytest.approx(2.5)
        level, message, values = status(bridge, f"mbsim: commands {port}")
        assert level == 0 and values["commands"] == 2 and values["lines"] == 5
        assert values["fault_garbage"] == 1 and values["fault_bad_value"] == 2 and "not finite" in values["last_fault"]
    finally:
        bridge.close()
        pty.close()
