"""The few QoS profiles the node uses, and their spellings for rosbag2 metadata, cyclonedds and rclpy.

One small value type, `QoS`, is what the rest of the project passes around; the three converters
turn it into what each transport needs. Only what the project varies is in it (reliability, keep-last
depth, durability); deadline, lifespan and liveliness stay at the middleware defaults, as in every
rclcpp/rclpy profile the node would otherwise use.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["QoS", "DEFAULT", "SENSOR", "TF", "LATCHED", "CLOCK",
           "to_bag_qos", "to_dds_qos", "to_rclpy_qos"]


@dataclass(frozen=True)
class QoS:
    """reliable: RELIABLE (else BEST_EFFORT); depth: KEEP_LAST depth; transient_local: TRANSIENT_LOCAL
    durability (else VOLATILE)."""

    reliable: bool = True
    depth: int = 10
    transient_local: bool = False

    def __post_init__(self):
        if int(self.depth) < 1:
            raise ValueError(f"QoS depth must be at least 1, got {self.depth}")


# rclpy/rclcpp's default profile (rmw_qos_profile_default): reliable, keep last 10, volatile.
DEFAULT = QoS(reliable=True, depth=10, transient_local=False)
# Sensors: reliable too. A reliable writer serves best-effort readers (SensorDataQoS subscribers)
# as well as reliable ones (RViz displays default to reliable); a best-effort writer would match
# only best-effort readers.
SENSOR = QoS(reliable=True, depth=10, transient_local=False)
# /tf: tf2_ros' TransformBroadcaster uses DynamicBroadcasterQoS = reliable, keep last 100.
TF = QoS(reliable=True, depth=100, transient_local=False)
# /tf_static and /robot_description: tf2_ros' StaticBroadcasterQoS and robot_state_publisher use
# reliable + transient local + depth 1, so that late subscribers still get the last message.
LATCHED = QoS(reliable=True, depth=1, transient_local=True)
# /clock: rclcpp::ClockQoS() = best effort, keep last 1, volatile. That is what rclcpp's and rclpy's
# TimeSource subscribe with (rclpy: QoSProfile(depth=1, reliability=BEST_EFFORT)) and what the
# rosbag2 player publishes /clock with. A best-effort reader matches this writer; a reader that
# insists on RELIABLE /clock does not (such a reader would not match `ros2 bag play --clock` either).
CLOCK = QoS(reliable=False, depth=1, transient_local=False)


def to_bag_qos(qos: QoS):
    """The offered-QoS profile rosbags records for a topic (one profile: we are the only writer)."""
    from rosbags.interfaces import (Qos, QosDurability, QosHistory, QosLiveliness,
                                    QosReliability, QosTime)

    zero = QosTime(sec=0, nsec=0)  # 0/0 = RMW "unspecified" = the middleware default (infinite)
    return Qos(
        history=QosHistory.KEEP_LAST,
        depth=int(qos.depth),
        reliability=QosReliability.RELIABLE if qos.reliable else QosReliability.BEST_EFFORT,
        durability=QosDurability.TRANSIENT_LOCAL if qos.transient_local else QosDurability.VOLATILE,
        deadline=zero,
        lifespan=zero,
        liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=zero,
        avoid_ros_namespace_conventions=False,
    )


def to_dds_qos(qos: QoS, typehash: str | None = None, *, writer: bool = True):
    """A cyclonedds Qos for a ROS 2 compatible writer (or reader, `writer=False`).

    XCDR1 representation (ROS 2 readers refuse XCDR2 writers as incompatible QoS); the
    `typehash=RIHS01_...;` user data that Jazzy's rmw_cyclonedds sets (informational).
    """
    from cyclonedds.core import Policy, Qos

    policies = [
        # max_blocking_time: how long a write may block while a lagging reliable reader holds
        # the writer's history full (Cyclone throttles on unacknowledged data): 100 ms
        Policy.Reliability.Reliable(max_blocking_time=100_000_000)
        if qos.reliable else Policy.Reliability.BestEffort,
        Policy.History.KeepLast(int(qos.depth)),
        Policy.Durability.TransientLocal if qos.transient_local else Policy.Durability.Volatile,
        Policy.DataRepresentation(use_cdrv0_representation=True),
    ]
    if typehash:
        policies.append(Policy.Userdata(f"typehash={typehash};".encode()))
    return Qos(*policies)


def to_rclpy_qos(qos: QoS):
    """An rclpy QoSProfile (rclpy is imported here only; it comes with a ROS 2 installation)."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=int(qos.depth),
        reliability=ReliabilityPolicy.RELIABLE if qos.reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if qos.transient_local
        else DurabilityPolicy.VOLATILE,
    )
