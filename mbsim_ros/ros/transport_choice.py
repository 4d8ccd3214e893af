"""Which transport a run uses: `transport_for("auto" | "rclpy" | "dds" | "foxglove" | "none")`.

    t = transport_for("auto", note=print)     # rclpy where it can carry every message, else live DDS

auto picks rclpy only where rclpy imports and every message package the node uses does too (the
ROS 2 wheels on PyPI, for one, lack tf2_msgs); otherwise it says in one line what is missing and
uses live DDS. rclpy asked for by name fails with that same line (ImportError). This module is the
only one that makes the concrete transports, so that `transport` (the interface) imports none.
"""
from __future__ import annotations

from .rclpy_transport import message_class, rclpy_missing
from .transport import NullTransport, Transport, log

__all__ = ["KINDS", "transport_for", "rclpy_missing", "message_class"]

KINDS = ("auto", "rclpy", "dds", "foxglove", "none")


def transport_for(kind: str = "auto", *, node=None, domain_id: int | None = None,
                  env=None, note=None, host: str | None = None, port: int | None = None) -> Transport:
    """The transport for `--transport auto|rclpy|dds|foxglove|none`.

    auto: rclpy where `rclpy_missing()` finds nothing missing, else live DDS through cyclonedds,
    after note(the one line saying what is missing) (default: a logged warning). rclpy: on `node`
    when given, else on an own node with its own spin thread; ImportError with that line where
    something is missing. dds: `domain_id` and `env` (default os.environ: ROS_DOMAIN_ID,
    ROS_AUTOMATIC_DISCOVERY_RANGE, ROS_LOCALHOST_ONLY, ROS_STATIC_PEERS, CYCLONEDDS_URI) as
    `DdsTransport` takes them. foxglove: a Foxglove WebSocket server on `host` and `port`
    (default 127.0.0.1:8765; OSError where it cannot listen). Bags are made with
    `bag.BagTransport(path)`.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown transport {kind!r}; choose one of {', '.join(KINDS)}")
    if kind in ("auto", "rclpy"):
        why = rclpy_missing()
        if why is None:
            kind = "rclpy"
        elif kind == "rclpy":
            raise ImportError(f"--transport rclpy: {why}")
        else:
            (note or log.warning)(f"transport auto: {why}; using live DDS")
            kind = "dds"
    if kind == "none":
        return NullTransport()
    if kind == "foxglove":
        from .foxglove import DEFAULT_HOST, DEFAULT_PORT, FoxgloveTransport
        return FoxgloveTransport(host or DEFAULT_HOST, DEFAULT_PORT if port is None else port)
    if kind == "rclpy":
        from .rclpy_transport import RclpyTransport
        return RclpyTransport(node)
    try:
        from .dds import DdsTransport
    except ImportError as e:
        raise ImportError(
            f"live DDS needs the cyclonedds package ({e}); install it with `pip install cyclonedds`, "
            "or source a ROS 2 installation to use rclpy, or record a bag instead") from e
    return DdsTransport(domain_id=domain_id, env=env)
