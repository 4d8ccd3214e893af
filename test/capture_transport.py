"""Transports for tests. RawCapture keeps every published message as sent: (topic, bytes, log
time in ns). Capture keeps them decoded (got[topic] = [message]) and lets a test deliver bytes to
a subscription (deliver(topic, data)) as a live transport's reader thread would."""
from collections import defaultdict

from mbsim_ros.ros import messages as msg
from mbsim_ros.ros.transport import NullTransport


class RawCapture(NullTransport):
    kind = "capture"

    def __init__(self):
        super().__init__()
        self.sent = []

    def publish(self, handle, data, stamp_ns=0):
        assert isinstance(data, bytes)      # the transports' contract
        super().publish(handle, data, stamp_ns)
        self.sent.append((handle.topic, data, stamp_ns))


class LiveCapture(RawCapture):
    """RawCapture as a live transport whose readers a test sets: `readers` (topics with one
    reader each; subscriber_count says so, and counts its calls in `count_calls`)."""
    kind = "live"
    receives = True

    def __init__(self):
        super().__init__()
        self.readers = set()
        self.count_calls = 0

    def subscriber_count(self, handle):
        self.count_calls += 1
        return int(handle.topic in self.readers)


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


def bridge_on(models, config):
    """(sim, bridge, transport): a Simulation of `models` under `config`, published by a Bridge
    over a Capture, the bridge a listener of a Session at rtf 0 (bridge.session: publishing
    inline, joint commands applied between steps; the initial state already sent)."""
    from mbsim_ros.ros.bridge import Bridge
    from mbsim_ros.run import Session, build_simulation
    sim = build_simulation(models, config)
    transport = Capture()
    bridge = Bridge(sim, transport, config)
    Session(sim, config.replace(real_time_factor=0.0), listeners=[bridge])
    return sim, bridge, transport


def steps(sim, bridge, n):
    """n steps, each handed to the bridge as the runner does (through its session, when it has
    one: joint control and all)."""
    if bridge.session is not None:
        bridge.session.step(n)
        return
    for _ in range(n):
        sim.step()
        bridge.on_step(sim)


def ros_session(sim, transport, config, **options):
    """(session, bridge): a Session of `sim` under `config` whose listener is a Bridge on
    `transport` (what `mbsim run` and the sim_node build); options go to the Session."""
    from mbsim_ros.ros.bridge import Bridge
    from mbsim_ros.run import Session
    bridge = Bridge(sim, transport, config, log=options.get("log"))
    return Session(sim, config, listeners=[bridge], **options), bridge
