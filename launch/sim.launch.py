"""Start the mbsim_ros simulator node and, by default, RViz.

    ros2 launch mbsim_ros sim.launch.py                          # the bundled SR1 world, with RViz
    ros2 launch mbsim_ros sim.launch.py model:=/path/robot.urdf namespace:=robot rviz:=false
    ros2 launch mbsim_ros sim.launch.py rtf:=0 config:=/path/my_sim.yaml

Arguments:
  model         model file(s), comma-separated; '' = the bundled SR1 humanoid on a floor
  config        the simulator's YAML configuration (default: share/mbsim_ros/config/sim.yaml)
  rviz          'true' to start RViz (rviz.launch.py) on the same namespace
  use_sim_time  use_sim_time of the node and of RViz (the node publishes /clock itself)
  namespace     the node's namespace: its topics are /<namespace>/joint_states, ... (give the
                model's name, or any other, when changing `model`; '' = the root namespace)
  rtf           real-time factor (float; 0 = as fast as possible)
  view          'true' to serve the live 3D view in a browser (view_port, default 8080)
  view_port     the live view's port
  foxglove      'true' to also serve every topic to Foxglove / Lichtblick (ws://127.0.0.1:<foxglove_port>)
  foxglove_port the Foxglove WebSocket server's port

/tf, /tf_static, /clock and /diagnostics are absolute names and stay global.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue


def generate_launch_description():
    share = get_package_share_directory('mbsim_ros')

    model = LaunchConfiguration('model')
    config = LaunchConfiguration('config')
    rviz = LaunchConfiguration('rviz')
    use_sim_time = LaunchConfiguration('use_sim_time')
    namespace = LaunchConfiguration('namespace')
    rtf = LaunchConfiguration('rtf')
    view = LaunchConfiguration('view')
    view_port = LaunchConfiguration('view_port')
    foxglove = LaunchConfiguration('foxglove')
    foxglove_port = LaunchConfiguration('foxglove_port')

    arguments = [
        DeclareLaunchArgument(
            'model', default_value='',
            description="Model file(s), comma-separated; '' = the bundled SR1 humanoid on a floor"),
        DeclareLaunchArgument(
            'config', default_value=os.path.join(share, 'config', 'sim.yaml'),
            description="The simulator's YAML configuration file ('' = none)"),
        DeclareLaunchArgument(
            'rviz', default_value='true',
            description='Start RViz with config/mbsim.rviz in the same namespace'),
        DeclareLaunchArgument(
            'use_sim_time', default_value='true',
            description='use_sim_time of the simulator node and RViz'),
        DeclareLaunchArgument(
            'namespace', default_value='SR1',
            description="Namespace of the node's topics and services ('' = root)"),
        DeclareLaunchArgument(
            'rtf', default_value='1.0',
            description='Real-time factor (0 = as fast as possible)'),
        DeclareLaunchArgument(
            'view', default_value='false',
            description='Serve the live 3D view at http://127.0.0.1:<view_port> (open it in a browser)'),
        DeclareLaunchArgument(
            'view_port', default_value='8080',
            description="The live view's port"),
        DeclareLaunchArgument(
            'foxglove', default_value='false',
            description='Also serve every topic over the Foxglove WebSocket protocol at '
                        'ws://127.0.0.1:<foxglove_port> (Foxglove, Lichtblick)'),
        DeclareLaunchArgument(
            'foxglove_port', default_value='8765',
            description="The Foxglove server's port"),
    ]

    sim_node = Node(
        package='mbsim_ros',
        executable='sim_node',
        name='mbsim',
        namespace=namespace,
        parameters=[{
            # value_type=str: '' (and paths that look like numbers or booleans) stay strings
            'model': ParameterValue(model, value_type=str),
            'config': ParameterValue(config, value_type=str),
            'real_time_factor': ParameterValue(rtf, value_type=float),
            'use_sim_time': ParameterValue(use_sim_time, value_type=bool),
            'view': ParameterValue(view, value_type=bool),
            'view_port': ParameterValue(view_port, value_type=int),
            'foxglove': ParameterValue(foxglove, value_type=bool),
            'foxglove_port': ParameterValue(foxglove_port, value_type=int),
        }],
        output='screen',
    )

    rviz_launch = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(share, 'launch', 'rviz.launch.py')),
        launch_arguments={
            'namespace': namespace,
            'use_sim_time': use_sim_time,
        }.items(),
        condition=IfCondition(rviz),
    )

    return LaunchDescription(arguments + [sim_node, rviz_launch])
