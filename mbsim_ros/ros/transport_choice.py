"""Which transport a run uses: `transport_for("auto" | "rclpy" | "dds" | "none")`.

    t = transport_for("auto", note=print)     # rclpy where it can carry every message, else live DDS

auto picks rclpy only where rclpy imports and every message package the node uses does too (the
ROS 2 wheels on PyPI, for one, lack tf2_msgs); otherwise it says in one line what is missing and
uses live DDS. rclpy asked for by name fails with that same line (ImportError). This module is the
only one that imports the concrete transports, so that `transport` (the interface) imports none.
"""
from __future__ import annotations

import importlib

from . import messages
from .transport import NullTransport, Transport, log

__all__ = ["KINDS", "transport_for", "rclpy_missing", "message_class"]

KINDS = ("auto", "rclpy", "dds", "none")


def message_class(typename: str):
    """The rosidl Python class of "pkg/msg/Name" (rclpy needs it to create endpoints), imported
    by its module's name; ImportError naming the package where it is not installed."""
    package, kind, name = typename.split("/")
    try:
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ImportError, AttributeError) as e:
        raise ImportError(f"{typename}: the ROS 2 package {package} is not importable ({e})") from e


def rclpy_missing(typenames=None) -> str | None:
    """Why rclpy cannot carry `typenames` (default: messages.TYPES, every type the node uses), in
    one line; None where it can."""
    typenames = messages.TYPES if typenames is None else typenames
    try:
        import rclpy  # noqa: F401
    except Exception as e:    # ImportError, or a sourced ROS whose C extensions do not load here
        return f"rclpy is not importable ({e}): source a ROS 2 installation"
    missing = []
    for package in sorted({t.split("/")[0] for t in typenames}):
        try:
            message_class(next(t for t in typenames if t.startswith(package + "/")))
        except ImportError:
            missing.append(package)
    if missing:
        return (f"rclpy is there but not the ROS 2 message package(s) {', '.join(missing)} "
                f"(install ros-<distro>-{missing[0].replace('_', '-')} or source a ROS 2 that has them)")
    return None


def transport_for(kind: str = "auto", *, node=None, domain_id: int | None = None,
                  env=None, note=None) -> Transport:
    """The transport for `--transport auto|rclpy|dds|none`.

    auto: rclpy where `rclpy_missing()` finds nothing missing, else live DDS through cyclonedds,
    after note(the one line saying what is missing) (default: a logged warning). rclpy: on `node`
    when given, else on an own node with its own spin thread; ImportError with that line where
    something is missing. dds: `domain_id` and `env` (default os.environ: ROS_DOMAIN_ID,
    ROS_AUTOMATIC_DISCOVERY_RANGE, ROS_LOCALHOST_ONLY, ROS_STATIC_PEERS, CYCLONEDDS_URI) as
    `DdsTransport` takes them. Bags are made with `bag.BagTransport(path)`.
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
