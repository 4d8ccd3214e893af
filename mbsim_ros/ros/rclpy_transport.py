"""ROS 2 through rclpy (a sourced ROS 2 installation): the CDR bytes from `messages` are published
as serialized messages (through rcl without the interpreter's lock: rcl_publish.py), subscriptions
are raw (`raw=True`) and hand the bytes on. rclpy is imported when the transport is made, never at package import."""
from __future__ import annotations

import importlib
import threading

from . import messages
from .qos import to_rclpy_qos
from .transport import Publisher, Subscription, Transport


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


class RclpyTransport(Transport):
    """On `node` when given (the caller spins it: callbacks run in its executor), else on an own
    node "mbsim" spun by an own thread (and rclpy initialized/shut down here if it was not)."""

    kind = "rclpy"
    receives = True

    def __init__(self, node=None, node_name: str = "mbsim"):
        why = rclpy_missing()      # rclpy and every message package: fail here, not at the first topic
        if why:
            raise ImportError(f"the rclpy transport: {why}")
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        from .rcl_publish import SerializedPublish

        super().__init__()
        self._rclpy, self._executor, self._thread, self._own_context = rclpy, None, None, False
        self._publish = SerializedPublish()
        if node is None:
            if not rclpy.ok():
                rclpy.init()
                self._own_context = True
            node = rclpy.create_node(node_name)
            self._executor = SingleThreadedExecutor()
            self._executor.add_node(node)
            self._thread = threading.Thread(target=self._executor.spin, name="mbsim-rclpy", daemon=True)
            self._thread.start()
        self.node = node

    def worker_threads(self) -> list:
        return [self._thread.native_id] if self._thread is not None else []

    def _advertise(self, pub: Publisher):
        return self.node.create_publisher(message_class(pub.typename), pub.topic, to_rclpy_qos(pub.qos))

    def _unadvertise(self, pub: Publisher) -> None:
        self.node.destroy_publisher(pub.impl)

    def publish(self, handle: Publisher, data: bytes, stamp_ns: int = 0) -> None:
        self._publish(handle.impl, data)
        handle.messages += 1
        handle.bytes += len(data)

    def subscriber_count(self, handle: Publisher) -> int:
        return handle.impl.get_subscription_count()

    def _subscribe(self, sub: Subscription):
        return self.node.create_subscription(message_class(sub.typename), sub.topic, sub.deliver,
                                             to_rclpy_qos(sub.qos), raw=True)

    def _close(self) -> None:
        if self._executor is not None:      # first: its thread must not meet a publisher being destroyed
            self._executor.shutdown()
            self._thread.join(timeout=5.0)
        for h in list(self._publishers.values()) + list(self._subscriptions.values()):
            (self.node.destroy_publisher if isinstance(h, Publisher) else self.node.destroy_subscription)(h.impl)
        if self._executor is not None:
            self.node.destroy_node()
            if self._own_context:
                self._rclpy.try_shutdown()
