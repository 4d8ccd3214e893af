"""Start RViz with the mbsim_ros display configuration (config/mbsim.rviz).

    ros2 launch mbsim_ros rviz.launch.py                    # for a simulator in namespace SR1
    ros2 launch mbsim_ros rviz.launch.py namespace:=robot use_sim_time:=false

RViz runs in `namespace`, so the relative topic names of mbsim.rviz (robot_description,
joint_states, LeftCamera/image_raw, ChestRange, ...) resolve to /<namespace>/...; TF comes from
the global /tf and /tf_static.

Arguments:
  namespace     the simulator node's namespace (default SR1, the bundled model's name)
  use_sim_time  use_sim_time of RViz (default true: follow the simulator's /clock)
  rviz_config   the .rviz file (default: share/mbsim_ros/config/mbsim.rviz)
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue


def generate_launch_description():
    share = get_package_share_directory('mbsim_ros')

    namespace = LaunchConfiguration('namespace')
    use_sim_time = LaunchConfiguration('use_sim_time')
    rviz_config = LaunchConfiguration('rviz_config')

    arguments = [
        DeclareLaunchArgument(
            'namespace', default_value='SR1',
            description="Namespace of the simulator's topics, in which RViz runs ('' = root)"),
        DeclareLaunchArgument(
            'use_sim_time', default_value='true',
            description="use_sim_time of RViz (follow the simulator's /clock)"),
        DeclareLaunchArgument(
            'rviz_config', default_value=os.path.join(share, 'config', 'mbsim.rviz'),
            description='RViz configuration file'),
    ]

    # No `name`: a node-name remap would apply to every node RViz creates in its process.
    rviz = Node(
        package='rviz2',
        executable='rviz2',
        namespace=namespace,
        arguments=['-d', rviz_config],
        parameters=[{'use_sim_time': ParameterValue(use_sim_time, value_type=bool)}],
        output='screen',
    )

    return LaunchDescription(arguments + [rviz])
