"""Hand-written cyclonedds types for a few ROS 2 messages, for the helper processes of test_dds.

Written from the .msg definitions (common_interfaces, Jazzy) and the ROS 2 DDS naming rules, not
from the project's code, so that these helpers are an independent reader and writer: they use
cyclonedds' own XCDR1 serializer, not rosbags'. Final, key-less structs, as rosidl generates.
"""
from dataclasses import dataclass

from cyclonedds.core import Policy, Qos
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import array, float64, int32, sequence, uint8, uint32


@dataclass
class Time(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: int32
    nanosec: uint32


@dataclass
class Header(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    stamp: Time
    frame_id: str


@dataclass
class Vector3(IdlStruct, typename="geometry_msgs::msg::dds_::Vector3_"):
    x: float64
    y: float64
    z: float64


@dataclass
class Quaternion(IdlStruct, typename="geometry_msgs::msg::dds_::Quaternion_"):
    x: float64
    y: float64
    z: float64
    w: float64


@dataclass
class Imu(IdlStruct, typename="sensor_msgs::msg::dds_::Imu_"):
    header: Header
    orientation: Quaternion
    orientation_covariance: array[float64, 9]
    angular_velocity: Vector3
    angular_velocity_covariance: array[float64, 9]
    linear_acceleration: Vector3
    linear_acceleration_covariance: array[float64, 9]


@dataclass
class JointState(IdlStruct, typename="sensor_msgs::msg::dds_::JointState_"):
    header: Header
    name: sequence[str]
    position: sequence[float64]
    velocity: sequence[float64]
    effort: sequence[float64]


@dataclass
class Image(IdlStruct, typename="sensor_msgs::msg::dds_::Image_"):
    header: Header
    height: uint32
    width: uint32
    encoding: str
    is_bigendian: uint8
    step: uint32
    data: sequence[uint8]


@dataclass
class String(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    data: str


TYPES = {"imu": Imu, "joint_state": JointState, "image": Image, "string": String}


def ros_qos(reliable=True, depth=10, transient_local=False):
    """QoS as a ROS 2 endpoint has it: XCDR1 data representation."""
    return Qos(Policy.Reliability.Reliable(100_000_000) if reliable else Policy.Reliability.BestEffort,
               Policy.History.KeepLast(depth),
               Policy.Durability.TransientLocal if transient_local else Policy.Durability.Volatile,
               Policy.DataRepresentation(use_cdrv0_representation=True))
