"""ROS 2 output and input without requiring a ROS 2 installation.

- `messages`: plain data -> serialized CDR bytes (rosbags typestore, Jazzy definitions)
- `qos`: the QoS profiles and their spellings for each transport
- `transport`: the transport interface and the "none" transport
- `transport_choice`: `transport_for(kind, ...)`, and what rclpy lacks for `auto`
- `bag`, `dds`, `rclpy_transport`: rosbag2 MCAP files, live DDS (cyclonedds), rclpy

Importing this package imports none of rosbags, cyclonedds or rclpy; the submodules do, when used.
"""
