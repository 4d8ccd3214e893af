"""The ROS inputs of a run, translated into Session calls: NS/joint_commands (JointState:
position, velocity, effort per joint, run.control.JointController says how empty, NaN and short
arrays read), NS/joint_efforts (Float64MultiArray, every DOF in model order), NS/actuator_controls
(JointState: name = actuator names, effort = their controls) and NS/inputs (JointState: name =
input names, position = values). A message of the wrong shape or a name the world lacks is
reported (each text once for the controls and inputs, whose publishers repeat them); the rest
is applied between steps."""
from __future__ import annotations

from . import messages as msg


class Inputs:
    """The input subscriptions of one Bridge (its topics, its report) for its session."""

    def __init__(self, bridge):
        self.bridge = bridge
        self._reported = set()

    def subscribe(self, transport):
        b = self.bridge
        transport.subscribe(b.named_topic("joint_commands_topic"), msg.JOINT_STATE, self._on_joint_commands)
        transport.subscribe(b.topic("joint_efforts"), msg.FLOAT64_MULTI_ARRAY, self._on_joint_efforts)
        if b.actuator_names:
            transport.subscribe(b.topic("actuator_controls"), msg.JOINT_STATE, self._on_actuator_controls)
        if b.input_names:
            transport.subscribe(b.topic("inputs"), msg.JOINT_STATE, self._on_inputs)

    def _session(self, what):
        session = self.bridge.session
        if session is None:
            self.bridge.report(f"{what} need a Session (the bridge was started without one)")
        return session

    def command_joints(self, names, position, velocity, effort):
        """A joint command (the topic or a serial port) to the session's joint control."""
        session = self._session("joint commands")
        if session is not None:
            session.command_joints(names, position, velocity, effort, report=self.bridge.report)

    def _on_joint_commands(self, data):
        cmd = msg.decode_joint_state(data)
        self.command_joints(cmd.names, cmd.position, cmd.velocity, cmd.effort)

    def _on_joint_efforts(self, data):
        values = msg.decode_float64_array(data)
        session = self._session("joint efforts")
        if session is not None:
            session.set_joint_efforts(values, report=self.bridge.report)

    def _on_actuator_controls(self, data):
        cmd = msg.decode_joint_state(data)
        if self._shaped("actuator_controls", cmd.names, cmd.effort, "effort"):
            session = self._session("actuator controls")
            if session is not None:
                session.set_actuator_controls(list(zip(cmd.names, cmd.effort)), report=self.report_once)

    def _on_inputs(self, data):
        cmd = msg.decode_joint_state(data)
        if self._shaped("inputs", cmd.names, cmd.position, "position"):
            session = self._session("inputs")
            if session is not None:
                session.set_inputs(list(zip(cmd.names, cmd.position)), report=self.report_once)

    def _shaped(self, topic, names, values, field):
        if len(values) != len(names):
            self.report_once(f"{topic}: expected one {field} per name, got {len(names)} names and "
                             f"{len(values)} {field} values; message ignored")
            return False
        return True

    def report_once(self, error):
        if error not in self._reported:
            self._reported.add(error)
            self.bridge.report(error)
