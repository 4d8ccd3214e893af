"""rosbag2 (MCAP storage) files written with rosbags' Writer: `ros2 bag info/play` read them.

Version 8 metadata (Humble's rosbag2 cannot read version 9), the offered QoS recorded per topic
(without it `ros2 bag play` replays /tf_static and /robot_description as volatile and late
subscribers such as RViz never get them), message definitions embedded in the MCAP schemas,
optional zstd compression of the MCAP chunks ("storage" compression; rosbag2's MCAP plugin
refuses per-message compression). Summary, statistics and metadata.yaml are written on close().
"""
from __future__ import annotations

import os
from pathlib import Path

from rosbags.rosbag2 import Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode, StoragePlugin

from .messages import TYPESTORE
from .qos import to_bag_qos
from .transport import Publisher, Subscription, Transport, log

__all__ = ["BagTransport"]


class BagTransport(Transport):
    """Record every advertised topic into the rosbag2 directory `path` (created; must not exist).

    compression: None or "zstd". ros_distro: written into metadata.yaml (rosbags writes its own
    name there; `ros2 bag info` shows it as the bag's "ROS Distro"). The message definitions
    and type hashes are Jazzy's (the typestore's), wire-identical to Humble's for these types.
    Subscriptions are accepted and never fire (a bag written here has no inputs).
    """

    kind = "bag"

    def __init__(self, path, compression: str | None = None, ros_distro: str = "jazzy"):
        super().__init__()
        self.path = Path(path)
        if self.path.exists():
            raise FileExistsError(
                f"{self.path} exists: a bag is written into a new directory "
                "(ros2 bag record refuses an existing one too); choose another path or delete it")
        if compression not in (None, "none", "zstd"):
            raise ValueError(f"compression must be None or 'zstd', got {compression!r}")
        self.compression = None if compression == "none" else compression
        self.ros_distro = ros_distro
        self._writer = Writer(self.path, version=8, storage_plugin=StoragePlugin.MCAP)
        if self.compression == "zstd":
            self._writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        self._writer.open()
        self._write = self._writer.write

    def _advertise(self, pub: Publisher):
        return self._writer.add_connection(pub.topic, pub.typename, typestore=TYPESTORE,
                                           offered_qos_profiles=[to_bag_qos(pub.qos)])

    def publish(self, handle: Publisher, data: bytes, stamp_ns: int = 0) -> None:
        self._write(handle.impl, int(stamp_ns), data)
        handle.messages += 1
        handle.bytes += len(data)

    def _subscribe(self, sub: Subscription):
        log.info("bag transport: %s is not an input here (nothing is received from a bag)", sub.topic)
        return None

    def _close(self) -> None:
        self._writer.close()
        self._set_distro()

    def _set_distro(self) -> None:
        """Replace rosbags' placeholder distro name in metadata.yaml (best effort: the bag is
        complete and valid either way)."""
        meta = self.path / "metadata.yaml"
        try:
            text = meta.read_text("utf8")
            new = text.replace("ros_distro: rosbags\n", f"ros_distro: {self.ros_distro}\n", 1)
            if new != text:
                tmp = meta.with_suffix(".yaml.tmp")
                tmp.write_text(new, "utf8")
                os.replace(tmp, meta)
        except OSError as e:
            log.warning("could not write ros_distro into %s: %s", meta, e)
