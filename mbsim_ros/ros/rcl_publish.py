"""Publishing serialized bytes through rcl itself, without the interpreter's lock.

rclpy's `Publisher.publish(bytes)` holds the lock for the whole DDS write (its pybind11 call does
not release it): ~0.6 ms for a 300 KB image to one reader in another process, more with more
readers, and the physics thread, waking for its next step, waits for the lock meanwhile. The same
call through ctypes (`rcl_publish_serialized_message`, which rclpy's own call makes) releases
the lock while rcl and DDS write.

    publish = SerializedPublish()            # librcl, loaded by rclpy already
    publish(rclpy_publisher, data)           # bytes (others are copied into bytes); PublishError if rcl fails
"""
from __future__ import annotations

import ctypes


class _SerializedMessage(ctypes.Structure):
    """rcl_serialized_message_t (rcutils_uint8_array_t): the bytes, their length and capacity, and
    an allocator (five pointers) that publishing never uses."""
    _fields_ = [("buffer", ctypes.c_char_p), ("buffer_length", ctypes.c_size_t),
                ("buffer_capacity", ctypes.c_size_t), ("allocator", ctypes.c_void_p * 5)]


class PublishError(RuntimeError):
    pass


class SerializedPublish:
    def __init__(self):
        import rclpy._rclpy_pybind11  # noqa: F401  (loads librcl: the same library is found again below)
        rcl = ctypes.CDLL("librcl.so")          # a CDLL call releases the interpreter's lock
        self._call = rcl.rcl_publish_serialized_message
        self._call.argtypes = [ctypes.c_void_p, ctypes.POINTER(_SerializedMessage), ctypes.c_void_p]
        self._call.restype = ctypes.c_int
        self._reset_error = rcl.rcutils_reset_error     # (librcutils, found through librcl)

    def __call__(self, publisher, data) -> None:
        """`data` on rclpy's `publisher` (an rclpy.publisher.Publisher); the publisher stays alive
        (rclpy's handle in use) for the call."""
        if data.__class__ is not bytes:
            data = bytes(data)          # (the templates' messages are bytes already)
        n = len(data)
        message = _SerializedMessage(data, n, n)        # points into `data`: no copy
        handle = publisher.handle
        with handle:
            code = self._call(handle.pointer, ctypes.byref(message), None)
        if code != 0:
            self._reset_error()
            raise PublishError(f"{publisher.topic_name}: rcl_publish_serialized_message returned {code}")
