"""Hardware in the loop on the ROS side of one run: the `devices:`, `emulate:` and `commands:`
sections of the configuration (config/hil.yaml) turned into real devices on the simulated
sensors' topics, emulated devices on serial ports and joint commands from serial ports.

Topics: a sensor with a devices: entry keeps its topic, frame and message type (NS/<sensor>),
which carries the real device's values (source serial or ros) or the simulation's (source
sim, or on_fault sim while the device is down); the simulated value always goes to
NS/<sensor>/sim as well. Such a sensor is not merged into a link's Imu (merge_imu).
Source ros: the real driver's topic (the sensor's message type: Imu, WrenchStamped, LaserScan)
is subscribed through the run's transport (rclpy or DDS; a bag or "none" has no inputs).
/diagnostics (statuses()): one status per device, "mbsim: device <sensor>", level 0 ok, 1 stale,
2 down, message "<state>: <why>; the topic carries <the real device | the last real value |
the simulation | nothing>" (on_fault decides while the device is not ok), values: source (real|sim: the chosen source), device (port or topic), protocol (csv|scip2|xsens|ros), state, received
(samples), used (instants served by a fresh sample), published (real values on the topic, held
ones included), superseded (samples overtaken before any instant used them), age_ms (of the
newest sample at the last instant), on_fault, fault_<kind> (counts from the parser: garbage,
checksum, half_frame, bad_value, overflow, ...; the port: open_failed, disconnected,
write_failed; this runtime: layout, bad_message), last_fault (the latest text of any of them),
residual_samples and, once there are some, residual_mean and residual_rms (real - simulated over
residual_window, per channel; one number for a scan). "mbsim: emulate <sensor>" (level 2 while
its port is not open): port, protocol, connected, frames, dropped, replies, fault_<kind>,
last_fault. "mbsim: commands <port>": port, connected, mode, lines, commands, fault_<kind>,
last_fault.
Switching at run time: set_source(sensor, "real" | "sim") (the sim_node's NS/<sensor>/set_source
service, std_srvs/SetBool: true = the real device, false = the simulation).
"""
from __future__ import annotations

import numpy as np

from ..hil.entries import check_port
from ..hil.sources import DeviceSource
from ..model import ConfigError
from . import messages as msg
from .qos import SENSOR
from .transport import check_topic

SWAPPABLE = ("accelerometer", "gyro", "force", "range")
MESSAGE_TYPES = {"accelerometer": msg.IMU, "gyro": msg.IMU, "force": msg.WRENCH_STAMPED, "range": msg.LASER_SCAN}
LEVEL = {"ok": 0, "stale": 1, "down": 2}


def _sections(config):
    commands = config.commands or []
    return (config.devices or {}, config.emulate or {},
            commands if isinstance(commands, list) else [commands])


def configured(config) -> bool:
    """Whether the configuration uses any hardware in the loop."""
    return any(_sections(config))


def _sensor_device(sim, name, where, what):
    devices = sim.devices
    if name not in devices:
        raise ConfigError(f"{where}: unknown sensor {name!r}; the models have {', '.join(sorted(devices)) or 'no sensors'}")
    dev = devices[name]
    if dev.kind not in SWAPPABLE:
        raise ConfigError(f"{where}: {name} is a {dev.kind} sensor; {what} supports {', '.join(SWAPPABLE)} sensors")
    if not dev.enabled:
        raise ConfigError(f"{where}: sensor {name} is disabled (sensors.{name}.enabled: false); its sample instants "
                          "come from the simulated sensor, enable it")
    return dev


def _check_rotation(dev, options, where):
    if dev.kind == "range" and any(options["rotation"]):
        raise ConfigError(f"{where}.rotation: a range sensor's scan is distances along the simulated rays and is "
                          "not rotated; mount the device as the sensor or leave rotation out")


def channels(dev) -> int:
    return len(dev.angles) if dev.kind == "range" else {"accelerometer": 3, "gyro": 3, "force": 6}[dev.kind]


class Hil:
    """The devices, emulators and command readers of one run, for a Bridge.

    bridge: the Bridge (dof names, topic names, the joint command path, submit and log).
    Building checks everything the world decides (sensor and joint names, each protocol's
    options, that each port exists) and raises ConfigError; start() opens the ports."""

    def __init__(self, sim, config, bridge, clock):
        from ..hil.commands import CommandReader
        from ..hil.emulate import Emulator
        from ..hil.serial_device import SerialDevice
        self.sim = sim
        self.bridge = bridge
        self.log = bridge.log
        self.clock = clock               # the session's: arrival stamps on the simulation clock
        devices, emulate, commands = _sections(config)
        self.sources = {}                # sensor name -> DeviceSource
        self.serial = []                 # SerialDevice
        self.ros_inputs = {}             # driver topic -> [(DeviceSource, Device)] (an Imu feeds accelerometer and gyro)
        self.emulators = {}              # sensor name -> Emulator
        self.readers = []                # CommandReader
        self._subscriptions = []
        try:
            ports = {}                   # port -> [(DeviceSource, Sensor)]: sensors sharing a device
            for name, options in devices.items():
                where = f"devices.{name}"
                dev = _sensor_device(sim, name, where, "devices:")
                _check_rotation(dev, options, where)
                serial = options.get("port") is not None
                if serial:
                    check_port(options["port"], f"{where}.port")
                src = DeviceSource(name, dev.kind, channels(dev), dev.rate, options, self.clock, log=self.log,
                                   connected=not serial)
                self.sources[name] = src
                if serial:
                    ports.setdefault(options["port"], []).append((src, dev.sensor))
                else:
                    self._check_topic(options["topic"], dev, where)
                    self.ros_inputs.setdefault(options["topic"], []).append((src, dev))
            for members in ports.values():
                self.serial.append(SerialDevice(members, log=self.log))
            used = {options["port"]: f"devices.{name}" for name, options in devices.items() if options.get("port")}
            shared = {}                  # port -> [(Device, options)]
            for name, options in emulate.items():
                where = f"emulate.{name}"
                dev = _sensor_device(sim, name, where, "emulate:")
                _check_rotation(dev, options, where)
                check_port(options["port"], f"{where}.port")
                if options["port"] in used:
                    raise ConfigError(f"{where}.port: {options['port']} is already used by {used[options['port']]}")
                shared.setdefault(options["port"], []).append((dev, options))
            for port, members in shared.items():
                self._emulator(port, members, Emulator)
                used[port] = f"emulate.{members[0][0].name}"
            for k, options in enumerate(commands):
                where = "commands" if len(commands) == 1 else f"commands[{k}]"
                check_port(options["port"], f"{where}.port")
                if options["port"] in used:
                    raise ConfigError(f"{where}.port: {options['port']} is already used by {used[options['port']]}")
                used[options["port"]] = where
                self.readers.append(CommandReader(options, bridge.dof_names, self._command, log=self.log, where=where))
        except BaseException:
            self.close()
            raise

    def _check_topic(self, topic, dev, where):
        try:
            check_topic(topic)
        except ValueError as e:
            raise ConfigError(f"{where}.topic: {e}") from None
        own = {self.bridge.topic(name) for name in self.sim.devices} | {self.bridge.topic(name, "sim") for name in self.sim.devices}
        if topic in own:
            raise ConfigError(f"{where}.topic: {topic} is published by this simulation; give the real driver's topic")
        for src, other in self.ros_inputs.get(topic, []):
            if MESSAGE_TYPES[other.kind] != MESSAGE_TYPES[dev.kind]:
                raise ConfigError(f"{where}.topic: {topic} is read as {MESSAGE_TYPES[other.kind]} for {other.name}; "
                                  f"a {dev.kind} sensor reads {MESSAGE_TYPES[dev.kind]}")

    def _emulator(self, port, members, Emulator):
        if len(members) == 1:
            dev, options = members[0]
            self.emulators[dev.name] = Emulator(dev.sensor, options, log=self.log)
            return
        kinds = sorted(dev.kind for dev, _ in members)
        names = " and ".join(f"emulate.{dev.name}" for dev, _ in members)
        if kinds != ["accelerometer", "gyro"] or any(o["protocol"] != "xsens" for _, o in members):
            raise ConfigError(f"{names}: one port ({port}) serves one emulated sensor, or an accelerometer and a "
                              "gyro as one Xsens MTi (protocol xsens)")
        (acc, acc_options), (gyro, gyro_options) = sorted(members, key=lambda m: m[0].kind)
        if acc.rate != gyro.rate or acc.delay != gyro.delay:
            raise ConfigError(f"{names}: one MTi message carries both, so they must sample together: rates "
                              f"{acc.rate:g} and {gyro.rate:g} Hz, delays {acc.delay:g} and {gyro.delay:g} s")
        if acc_options["baudrate"] != gyro_options["baudrate"]:
            raise ConfigError(f"{names}: the same port at two baudrates")
        em = Emulator(acc.sensor, acc_options, log=self.log, gyro=(gyro.sensor, gyro_options))
        self.emulators[acc.name] = self.emulators[gyro.name] = em

    # -- start / stop -------------------------------------------------------------------------
    def start(self, transport):
        """Open every port (their threads retry until the devices answer) and subscribe to the
        real drivers' topics."""
        for topic, members in self.ros_inputs.items():
            self._subscriptions.append(transport.subscribe(topic, MESSAGE_TYPES[members[0][1].kind],
                                                           self._ros_callback(members), SENSOR))
            if not transport.receives:
                self.log(f"{', '.join(src.name for src, _ in members)}: source ros reads {topic}, but the "
                         f"{transport.kind} transport receives nothing; the device stays stale")
        for part in self._parts():
            part.start()

    def _parts(self):
        return (*self.serial, *dict.fromkeys(self.emulators.values()), *self.readers)

    def close(self):
        for part in self._parts():
            part.close()

    # -- inputs -------------------------------------------------------------------------------
    def _ros_callback(self, members):
        typename = MESSAGE_TYPES[members[0][1].kind]

        def on_message(data):
            try:
                m = msg.decode(data, typename)
            except Exception as e:     # a malformed message: a fault, not the end of the receive thread
                for src, _ in members:
                    src.fault("bad_message", f"{src.name}: {src.device}: undecodable {typename}: {e}")
                return
            stamp = msg.stamp_seconds(m.header.stamp)
            for src, dev in members:
                if dev.kind == "accelerometer":
                    v = m.linear_acceleration
                    values = (v.x, v.y, v.z)
                elif dev.kind == "gyro":
                    v = m.angular_velocity
                    values = (v.x, v.y, v.z)
                elif dev.kind == "force":
                    f, t = m.wrench.force, m.wrench.torque
                    values = (f.x, f.y, f.z, t.x, t.y, t.z)
                else:
                    values = np.asarray(m.ranges, dtype=np.float64)
                src.push(values, stamp)
        return on_message

    def _command(self, names, mode, values):
        """A joint command from a serial port (reader thread) -> the bridge's command path."""
        empty = np.zeros(0)
        cmd = msg.JointCommand(0.0, list(names), values if mode == "position" else empty,
                               values if mode == "velocity" else empty, values if mode == "effort" else empty)
        self.bridge.inputs.command_joints(cmd.names, cmd.position, cmd.velocity, cmd.effort)

    # -- the physics thread -------------------------------------------------------------------
    def real_value(self, name, reading, t):
        """What sensor `name`'s topic carries for the new simulated `reading` (None: nothing)."""
        return self.sources[name].take(reading.stamp, t, reading.values)

    # -- any thread ---------------------------------------------------------------------------
    def set_source(self, name: str, source: str) -> str:
        """Put the real device ("real", "serial" or "ros") or the simulation ("sim") on sensor
        `name`'s topic; returns what the topic now carries. ValueError for an unknown sensor or
        source (the caller answers the request with it)."""
        src = self.sources.get(name)
        if src is None:
            raise ValueError(f"set_source: {name!r} has no real device; devices: lists "
                             f"{', '.join(self.sources) or 'none'}")
        if source not in ("real", "sim", "serial", "ros"):
            raise ValueError(f"set_source: source must be real or sim, got {source!r}")
        text = src.set_source(source)
        self.log(text)
        return text

    def statuses(self):
        """(name, level, message, {key: value}) for /diagnostics."""
        out = []
        for name, src in self.sources.items():
            s = src.stats()
            values = {"source": s["source"], "device": s["device"], "protocol": src.options.get("protocol") or "ros",
                      "state": s["state"], "received": s["received"], "used": s["used"],
                      "published": s["published"], "superseded": s["superseded"],
                      "age_ms": "none" if not np.isfinite(s["age"]) else f"{1e3 * s['age']:.3g}",
                      "on_fault": src.on_fault}
            for kind, count in sorted(s["faults"].items()):
                values[f"fault_{kind}"] = count
            values["last_fault"] = s["last_fault"] or ""
            values["residual_samples"] = s["residual_samples"]
            if s["residual_samples"]:
                values["residual_mean"] = _numbers(s["residual_mean"])
                values["residual_rms"] = _numbers(s["residual_rms"])
            message = f"{s['state']}: {s['reason']}; the topic carries {src.carries()}"
            out.append((f"mbsim: device {name}", LEVEL[s["state"]], message, values))
        for em in dict.fromkeys(self.emulators.values()):
            name = em.name
            s = em.stats()
            values = {k: v for k, v in s.items() if k != "faults"}
            values.update({f"fault_{k}": v for k, v in sorted(s["faults"].items())})
            values["last_fault"] = s["last_fault"] or ""
            out.append((f"mbsim: emulate {name}", 0 if s["connected"] else 2,
                        f"writing {s['protocol']} to {s['port']}" if s["connected"] else f"{s['port']} not open", values))
        for reader in self.readers:
            s = reader.stats()
            values = {k: v for k, v in s.items() if k != "faults"}
            values.update({f"fault_{k}": v for k, v in sorted(s["faults"].items())})
            values["last_fault"] = s["last_fault"] or ""
            out.append((f"mbsim: commands {s['port']}", 0 if s["connected"] else 2,
                        f"{s['commands']} commands ({s['mode']})" if s["connected"] else f"{s['port']} not open", values))
        return out


def _numbers(x):
    return " ".join(f"{v:.4g}" for v in np.atleast_1d(x))
