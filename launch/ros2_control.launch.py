"""ros2_control driving the bundled SR1 through the simulator's topics (a worked example).

    ros2 launch mbsim_ros ros2_control.launch.py
    ros2 control list_controllers
    ros2 action send_goal /right_arm_controller/follow_joint_trajectory \
        control_msgs/action/FollowJointTrajectory "{trajectory: {joint_names: [RARM_ELBOW], \
        points: [{positions: [-1.0], time_from_start: {sec: 2}}]}}"

Starts the simulator (namespace SR1, config/ros2_control_sim.yaml: every joint a position servo
that holds its initial angle until commanded), controller_manager's ros2_control_node with the
robot description plus a <ros2_control> block for joint_state_topic_hardware_interface
(commands to /SR1/joint_commands, states from /SR1/joint_states; mbsim_ros/ros/ros2_control.py)
and config/ros2_control.yaml, then the joint_state_broadcaster and right_arm_controller spawners.
Needs ros-$ROS_DISTRO-ros2-control, -ros2-controllers and -joint-state-topic-hardware-interface.
MoveIt goes on top as on any ros2_control robot.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch_ros.actions import Node


def generate_launch_description():
    import yaml

    import mbsim_ros as mb
    from mbsim_ros.ros.ros2_control import ros2_control_block, with_ros2_control

    share = get_package_share_directory('mbsim_ros')
    sim_config = os.path.join(share, 'config', 'ros2_control_sim.yaml')
    controllers = os.path.join(share, 'config', 'ros2_control.yaml')
    with open(sim_config, encoding='utf-8') as f:
        interfaces = yaml.safe_load(f)['command_interfaces']
    model = mb.load_model(os.path.join(share, 'models', 'SR1.wrl'))
    description = with_ros2_control(mb.to_urdf(model), ros2_control_block(
        interfaces, commands_topic='/SR1/joint_commands', states_topic='/SR1/joint_states'))

    sim_node = Node(package='mbsim_ros', executable='sim_node', name='mbsim', namespace='SR1',
                    parameters=[{'config': sim_config, 'use_sim_time': True}], output='screen')
    control_node = Node(package='controller_manager', executable='ros2_control_node',
                        parameters=[{'robot_description': description}, controllers], output='screen')
    spawners = [Node(package='controller_manager', executable='spawner', arguments=[name, '--controller-manager',
                                                                                     '/controller_manager'])
                for name in ('joint_state_broadcaster', 'right_arm_controller')]
    return LaunchDescription([sim_node, control_node] + spawners)
