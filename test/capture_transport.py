"""A transport for tests: keeps every published message, decoded (got[topic] = [message]), and
lets a test deliver bytes to a subscription (deliver(topic, data)) as a live transport's reader
thread would."""
from collections import defaultdict

from mbsim_ros.ros import messages as msg
from mbsim_ros.ros.transport import NullTransport


class Capture(NullTransport):
    kind = "capture"
    receives = True

    def __init__(self):
        super().__init__()
        self.got = defaultdict(list)
        self.callbacks = {}

    def publish(self, handle, data, stamp_ns=0):
        super().publish(handle, data, stamp_ns)
        self.got[handle.topic].append(msg.decode(data, handle.typename))

    def _subscribe(self, sub):
        self.callbacks[sub.topic] = sub.deliver

    def deliver(self, topic, data):
        self.callbacks[topic](data)
