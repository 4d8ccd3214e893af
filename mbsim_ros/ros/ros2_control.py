"""ros2_control through topics: the <ros2_control> block that makes controller_manager drive a
simulated robot through joint_state_topic_hardware_interface, which writes the command topic
(joint_commands) and reads the state topic (joint_states) that the Bridge serves
(launch/ros2_control.launch.py uses it). Light: no ROS libraries."""
from __future__ import annotations

from xml.sax.saxutils import quoteattr

PLUGIN = "joint_state_topic_hardware_interface/JointStateTopicSystem"
STATE_INTERFACES = ("position", "velocity", "effort")


def ros2_control_block(joints, commands_topic, states_topic, name="mbsim", plugin=PLUGIN) -> str:
    """The <ros2_control> element: `joints` is {joint: [command interfaces]} (position, velocity,
    effort), every joint with the position, velocity and effort state interfaces."""
    lines = [f"  <ros2_control name={quoteattr(name)} type=\"system\">",
             "    <hardware>",
             f"      <plugin>{plugin}</plugin>",
             f"      <param name=\"joint_commands_topic\">{commands_topic}</param>",
             f"      <param name=\"joint_states_topic\">{states_topic}</param>",
             "    </hardware>"]
    for joint, commands in joints.items():
        lines.append(f"    <joint name={quoteattr(joint)}>")
        lines += [f"      <command_interface name=\"{c}\"/>" for c in commands]
        lines += [f"      <state_interface name=\"{s}\"/>" for s in STATE_INTERFACES]
        lines.append("    </joint>")
    lines.append("  </ros2_control>")
    return "\n".join(lines) + "\n"


def with_ros2_control(urdf: str, block: str) -> str:
    """The URDF text with `block` added as the last element of <robot>."""
    end = urdf.rfind("</robot>")
    if end < 0:
        raise ValueError("with_ros2_control: the URDF has no </robot> end tag")
    return urdf[:end] + block + urdf[end:]


def moving_joints(model) -> list:
    """The joints ros2_control can command: one coordinate each (revolute, continuous, prismatic)."""
    return [j.name for j in model.joints if j.nq == 1 and j.nv == 1 and j.type not in ("fixed", "ball", "free")]
