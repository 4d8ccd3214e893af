"""Simulation state and sensor readings -> ROS 2 topics on any transport; commands -> sim.tau.

Topics (NS = the namespace, by default the first model's name):
  NS/joint_states (JointState, one entry per DOF of every joint with one coordinate per DOF),
  NS/robot_description (String, transient local; one per model, NS/<model>/robot_description
  for the models after the first), NS/<sensor> (Imu, WrenchStamped, LaserScan), NS/<camera>/
  image_raw, camera_info, depth/image_raw, depth/camera_info, points; /tf, /tf_static, /clock,
  /diagnostics. Inputs: NS/joint_commands (JointState: effort, or position/velocity tracked by
  PD gains), NS/joint_efforts (Float64MultiArray, every DOF in model order).
Actuators and inputs (when the models have them): NS/actuator_controls (JointState: name =
actuator names, effort = their controls, e.g. OpenSim excitations; the actuator's force is gain *
control), NS/inputs (JointState: name = input names, position = values, read by `input`
functions: Chrono CONTROLLER functions); names not in the models are reported once and ignored;
values hold until the next message. NS/actuator_controls/state (JointState, effort = the
controls in force) at joint_state_rate. JointState because it is the standard message of named
values (no new dependency; `ros2 topic pub` and rqt publish it).
Hardware in the loop (ros/hil.py): a sensor with a real device keeps its topic, which carries
the device's values, and gets NS/<sensor>/sim with the simulated ones; emulated sensors are
written to serial ports; joint commands also come from serial ports.
Names (joint_states, frame ids, sensor topics) are world names (model/names.py): a model's own,
"<entity>/<name>" where an earlier model has the name. Models spawned or deleted while running
(Session.spawn/delete -> world_changed) gain or lose their topics, descriptions and frames.
TF: frame ids are the links' world names (with the frame prefix); a floating base is odom ->
root link with a static world -> odom; other roots hang from world; fixed joints, sensor
frames, camera optical frames and range laser frames are static. A moving joint with a
child_pose ends at the URDF's `<joint>_child_frame` link (formats.urdf.joint_frame_links), with
a static child_frame -> child link, so TF has every link the URDF has (but the intermediate
links of joints written as chains).
Every message is built once and serialized once; building and writing run in `publish` (an
AsyncPublisher's submit, so the physics thread never waits on a transport), or inline.
"""
from __future__ import annotations

import math
import re

import numpy as np

from ..formats import to_urdf
from ..formats.urdf import joint_frame_links
from ..model import sensor_ros_frames
from ..model.names import renamed
from ..model.transforms import inverse_transform
from ..sensors import Reading
from . import hil
from . import messages as msg
from .qos import CLOCK, DEFAULT, LATCHED, SENSOR, TF


def ros_name(text: str) -> str:
    """A valid ROS name segment from a model or sensor name."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return name if name and not name[0].isdigit() else "_" + name


class Rate:
    """Due at k / rate on the simulation clock."""

    def __init__(self, rate):
        self.period = 1.0 / rate
        self.k = 0

    def due(self, t):
        if t + 1e-9 >= self.k * self.period:
            self.k = int(math.floor(t / self.period + 1e-9)) + 1
            return True
        return False


class JointController:
    """Efforts and PD targets from the command topics, turned into sim.tau before each step."""

    def __init__(self, sim, dofs, gains):
        nv = sim.nv
        self.effort = np.zeros(nv)
        self.q_target = np.full(nv, np.nan)
        self.v_target = np.full(nv, np.nan)
        self.kp = np.zeros(nv)
        self.kd = np.zeros(nv)
        self.q_of_v = np.full(nv, -1)
        self.index = {}                    # DOF name -> v index
        default = gains.get("default", [0.0, 0.0])
        for name, iq, iv, joint in dofs:
            self.index[name] = iv
            self.q_of_v[iv] = iq
            self.kp[iv], self.kd[iv] = gains.get(name, gains.get(joint, default))
        self.active = False

    def adopt(self, old):
        """Keep the efforts and targets `old` held for the DOFs (by name) still in the world."""
        for name, iv in self.index.items():
            if name in old.index:
                j = old.index[name]
                self.effort[iv], self.q_target[iv], self.v_target[iv] = old.effort[j], old.q_target[j], old.v_target[j]
        self.active = old.active

    def command(self, cmd):
        """A decoded JointState command (names with effort and/or position/velocity)."""
        unknown = [n for n in cmd.names if n not in self.index]
        if unknown:
            return f"joint_commands: unknown joint(s) {', '.join(unknown)}"
        for k, name in enumerate(cmd.names):
            iv = self.index[name]
            if cmd.effort is not None and len(cmd.effort) == len(cmd.names):
                self.effort[iv] = cmd.effort[k]
            if cmd.position is not None and len(cmd.position) == len(cmd.names):
                self.q_target[iv] = cmd.position[k]
                if cmd.velocity is None or len(cmd.velocity) != len(cmd.names):
                    self.v_target[iv] = 0.0
            if cmd.velocity is not None and len(cmd.velocity) == len(cmd.names):
                self.v_target[iv] = cmd.velocity[k]
        self.active = True
        return None

    def efforts(self, values):
        if len(values) != len(self.effort):
            return f"joint_efforts: expected {len(self.effort)} values (every DOF in model order), got {len(values)}"
        self.effort[:] = values
        self.active = True
        return None

    def apply(self, sim):
        if not self.active:
            return
        tau = self.effort.copy()
        has_q = ~np.isnan(self.q_target)
        if has_q.any():
            iq = self.q_of_v[has_q]
            tau[has_q] += self.kp[has_q] * (self.q_target[has_q] - sim.q[iq])
        has_v = ~np.isnan(self.v_target)
        if has_v.any():
            tau[has_v] += self.kd[has_v] * (self.v_target[has_v] - sim.v[has_v])
        sim.tau = tau


_FIXED_KEYS = ("clock", "tf", "tf_static", "diagnostics", "joint_states", "actuator_controls/state")


def _derived(entity, world_base, bare_base, name):
    """A frame named after one of an entity's things (`name`, derived from `bare_base`) is
    qualified like that thing's world name `world_base`."""
    return entity + "/" + name if world_base != bare_base else name


class Bridge:
    """Publishes one Simulation (mbsim_ros.sensors.Simulation) on `transport`.

    config: the run configuration (ros/config.py). publish(job): how built jobs run (an
    AsyncPublisher's submit; default inline). submit(fn): how command callbacks reach the
    physics thread (a Runner's submit; default: applied at once)."""

    def __init__(self, sim, transport, config, publish=None, submit=None, log=None):
        self.sim = sim
        self.transport = transport
        self.config = config
        self.publish_job = publish or (lambda job: job())
        self.submit = submit or (lambda fn: fn())
        self.log = log or (lambda text: None)
        given = (config.get("namespace") or "").strip("/")     # a valid ROS namespace (config checks it)
        self.ns = "/" + "/".join(ros_name(p) for p in given.split("/")) if given else "/" + ros_name(sim.entities[0])
        self._first = sim.entities[0]
        self.prefix = config.get("frame_prefix", "")
        self.rates = {key: Rate(min(float(config[key]), 1.0 / sim.dt))
                      for key in ("joint_state_rate", "tf_rate", "clock_rate", "diagnostics_rate")}
        self._layout()
        self.controller = JointController(sim, self.dofs, config.get("pd_gains", {}))
        self.actuator_names = list(sim.actuator_names)
        self.input_names = list(sim.input_names)
        self._reported = set()
        self.runner_stats = lambda: {}
        self._last = {}
        self.pubs = {}
        self.errors = []
        self.hil = None
        if hil.configured(config):
            self.hil = hil.Hil(sim, config, self)

    # -- layout -----------------------------------------------------------------------------
    def frame(self, name):
        return self.prefix + name

    def _layout(self):
        """DOFs for joint_states, the TF tree (static and moving edges), devices' topics; every
        name is the world name (model/names.py: the first model's bare, a later model's
        "<entity>/<name>" where it clashes)."""
        sim = self.sim
        names = sim.names
        self.dofs = []                       # (DOF name, q index, v index, joint name)
        self.moving = []                     # (parent frame, child frame, parent link or None, child link,
                                             #  the child frame in the child link or None)
        self.static = []                     # (parent frame, child frame, 4x4)
        floating = False
        for k, (entity, model) in enumerate(zip(sim.entities, sim.models)):
            _, q_off, v_off = sim.compiled.offsets[k]
            link = names.table(entity, "link")
            joint = names.table(entity, "joint")
            place = sim.compiled.placements[k]
            dof_names = model.dof_names
            child_frames = joint_frame_links(model)
            for j in model.joints:
                if j.type not in ("fixed", "ball", "free"):
                    for i in range(j.nv):
                        self.dofs.append((joint[dof_names[j.v_index + i]], q_off + j.q_index + i, v_off + j.v_index + i,
                                          joint[j.name]))
                parent = self.frame(link[j.parent]) if j.parent is not None else ("odom" if j.type == "free" else "world")
                floating = floating or (j.parent is None and j.type == "free")
                child = link[j.child]
                if j.type == "fixed":
                    origin = j.origin if j.parent is not None else place @ j.origin
                    self.static.append((parent, self.frame(child), origin @ inverse_transform(j.child_pose)))
                elif j.name in child_frames:
                    frame = self.frame(_derived(entity, child, j.child, child_frames[j.name]))
                    self.moving.append((parent, frame, link.get(j.parent), child, j.child_pose))
                    self.static.append((frame, self.frame(child), inverse_transform(j.child_pose)))
                else:
                    self.moving.append((parent, self.frame(child), link.get(j.parent), child, None))
            for sn in model.sensors:
                name = names.world(entity, "sensor", sn.name)
                self.static.append((self.frame(link[sn.link]), self.frame(name), sn.pose))
                for fname, pose in sensor_ros_frames(sn):
                    self.static.append((self.frame(name), self.frame(name + fname[len(sn.name):]), pose))
        if floating:
            self.static.append(("world", "odom", np.eye(4)))
        self.dof_names = [d[0] for d in self.dofs]
        self.dof_q = np.array([d[1] for d in self.dofs], dtype=int)
        self.dof_v = np.array([d[2] for d in self.dofs], dtype=int)
        # accelerometer + gyro pairs merged into one Imu per link (same pose only)
        self.merged = {}
        if self.config.get("merge_imu"):
            real = set(self.config.get("devices") or {})     # keep their own topics (and /sim)
            devs = [d for d in sim.devices.values() if d.name not in real]
            for a in (d for d in devs if d.kind == "accelerometer"):
                g = next((d for d in devs if d.kind == "gyro" and d.link == a.link and d.rate == a.rate
                          and d.delay == a.delay and np.allclose(d.sensor.pose, a.sensor.pose)), None)
                if g is not None:
                    self.merged[a.name] = (a.link + "_imu", a, g)
                    self.merged[g.name] = self.merged[a.name]

    def topic(self, *parts):
        """NS/<name>/<rest>: the name (a world name, perhaps "<entity>/<thing>") made of valid
        segments; the rest as given."""
        head = "/".join(ros_name(seg) for seg in parts[0].split("/"))
        return "/".join([self.ns, head] + list(parts[1:]))

    def _description_topic(self, entity):
        """The first model's robot_description is NS/robot_description; another's
        NS/<entity>/robot_description (kept for the run, whoever joins or leaves)."""
        return self.topic("robot_description") if entity == self._first else self.topic(entity, "robot_description")

    # -- start / stop -----------------------------------------------------------------------
    def start(self):
        """Advertise every topic, publish robot_description and /tf_static, subscribe inputs."""
        t, sim = self.transport, self.sim
        adv = self.pubs
        adv["clock"] = t.advertise("/clock", msg.CLOCK, CLOCK)
        adv["tf"] = t.advertise("/tf", msg.TF_MESSAGE, TF)
        adv["tf_static"] = t.advertise("/tf_static", msg.TF_MESSAGE, LATCHED)
        adv["diagnostics"] = t.advertise("/diagnostics", msg.DIAGNOSTIC_ARRAY, DEFAULT)
        adv["joint_states"] = t.advertise(self.topic("joint_states"), msg.JOINT_STATE, DEFAULT)
        if self.actuator_names:
            adv["actuator_controls/state"] = t.advertise(self.topic("actuator_controls", "state"), msg.JOINT_STATE, DEFAULT)
        self._advertise_models()
        t.subscribe(self.topic("joint_commands"), msg.JOINT_STATE, self._on_joint_commands)
        t.subscribe(self.topic("joint_efforts"), msg.FLOAT64_MULTI_ARRAY, self._on_joint_efforts)
        if self.actuator_names:
            t.subscribe(self.topic("actuator_controls"), msg.JOINT_STATE, self._on_actuator_controls)
        if self.input_names:
            t.subscribe(self.topic("inputs"), msg.JOINT_STATE, self._on_inputs)
        if self.hil is not None:
            self.hil.start(t)
        self.on_step(sim)              # the initial state at t

    def _model_topics(self):
        """{key: (topic, type, qos)} of what the world's models publish: descriptions, sensors."""
        sim = self.sim
        out = {f"robot_description/{e}": (self._description_topic(e), msg.STRING, LATCHED) for e in sim.entities}
        for dev in sim.devices.values():
            if not dev.enabled:
                continue
            if dev.name in self.merged:
                topic = self.merged[dev.name][0]
                out[topic] = (self.topic(topic), msg.IMU, SENSOR)
            elif dev.kind in ("accelerometer", "gyro"):
                out[dev.name] = (self.topic(dev.name), msg.IMU, SENSOR)
            elif dev.kind == "force":
                out[dev.name] = (self.topic(dev.name), msg.WRENCH_STAMPED, SENSOR)
            elif dev.kind == "range":
                out[dev.name] = (self.topic(dev.name), msg.LASER_SCAN, SENSOR)
            elif dev.kind == "camera":
                parts = []
                if dev.color:
                    parts += [("image_raw", msg.IMAGE), ("camera_info", msg.CAMERA_INFO)]
                if dev.depth:
                    parts += [("depth/image_raw", msg.IMAGE), ("depth/camera_info", msg.CAMERA_INFO)]
                    if dev.points:
                        parts.append(("points", msg.POINT_CLOUD2))
                for sub, typename in parts:
                    out[dev.name + "/" + sub] = (self.topic(dev.name, sub), typename, SENSOR)
            if self.hil is not None and dev.name in self.hil.sources:   # the simulated value beside the real one
                out[dev.name + "/sim"] = (self.topic(dev.name, "sim"), out[dev.name][1], SENSOR)
        return out

    def _advertise_models(self):
        """Advertise the models' topics not advertised yet, unadvertise those no model has any
        more; publish the new descriptions (with the world names TF and joint_states use) and the
        whole static TF tree (latched)."""
        t, sim, adv = self.transport, self.sim, self.pubs
        wanted = self._model_topics()
        for key in [k for k in adv if k not in _FIXED_KEYS and k not in wanted]:
            t.unadvertise(adv.pop(key))
        new = [k for k in wanted if k not in adv]
        for key in new:
            adv[key] = t.advertise(*wanted[key])
        stamp = sim.t
        for entity, model in zip(sim.entities, sim.models):
            if f"robot_description/{entity}" in new:
                t.publish(adv[f"robot_description/{entity}"], msg.string(to_urdf(renamed(model, sim.names, entity))),
                          msg.to_nanoseconds(stamp))
        t.publish(adv["tf_static"], msg.tf_message([(stamp, p, c, T) for p, c, T in self.static]),
                  msg.to_nanoseconds(stamp))

    def world_changed(self):
        """After sim.add_model / remove_model / set_model_pose (between steps, in the physics
        thread): lay the world out again, advertise the new models' topics and descriptions,
        unadvertise those of models that left, republish /tf_static, and keep the joint
        commands of the DOFs that stay."""
        old_controller = self.controller
        self._layout()
        self.controller = JointController(self.sim, self.dofs, self.config.get("pd_gains", {}))
        self.controller.adopt(old_controller)
        self._advertise_models()
        for name in list(self._last):
            if name not in self.sim.devices:
                del self._last[name]

    def close(self):
        """Stop what start() started besides the transport (serial ports and their threads)."""
        if self.hil is not None:
            self.hil.close()

    def _report(self, error):
        if error:
            if len(self.errors) < 100:
                self.errors.append(error)
            self.log(error)

    def _on_joint_commands(self, data):
        cmd = msg.decode_joint_state(data)
        self.submit(lambda: self._report(self.controller.command(cmd)))

    def _on_joint_efforts(self, data):
        values = msg.decode_float64_array(data)
        self.submit(lambda: self._report(self.controller.efforts(values)))

    def _on_actuator_controls(self, data):
        cmd = msg.decode_joint_state(data)
        self.submit(lambda: self._set_by_name("actuator_controls", "actuator", cmd.names, cmd.effort, "effort",
                                              self.actuator_names, self.sim.set_control))

    def _on_inputs(self, data):
        cmd = msg.decode_joint_state(data)
        self.submit(lambda: self._set_by_name("inputs", "input", cmd.names, cmd.position, "position",
                                              self.input_names, self.sim.set_input))

    def _set_by_name(self, topic, what, names, values, field, known, set_value):
        """set_value(name, value) for each known name; a bad message or name is reported once."""
        if len(values) != len(names):
            self._report_once(f"{topic}: expected one {field} per name, got {len(names)} names and "
                              f"{len(values)} {field} values; message ignored")
            return
        for name, value in zip(names, values):
            if name not in known:
                self._report_once(f"{topic}: no {what} named {name!r} (ignored); "
                                  f"expected one of {', '.join(known)}")
            elif not math.isfinite(value):
                self._report_once(f"{topic}: {name} = {value} is not a finite number (ignored)")
            else:
                set_value(name, float(value))

    def _report_once(self, error):
        if error not in self._reported:
            self._reported.add(error)
            self._report(error)

    # -- every step -------------------------------------------------------------------------
    def on_step(self, sim):
        """After a step: collect what is due (copies of the state, new readings) in the physics
        thread, hand building and writing to publish_job; then set tau for the next step."""
        t = sim.t
        work = []
        rates = self.rates
        hil_ = self.hil
        if hil_ is not None:
            hil_.clock.tick(t)
        if rates["clock_rate"].due(t):
            work.append(("clock", t))
        if rates["joint_state_rate"].due(t):
            work.append(("joint_states", t, sim.q[self.dof_q].copy(), sim.v[self.dof_v].copy(),
                         sim.tau[self.dof_v].copy(), self.dof_names))
            if self.actuator_names:
                work.append(("actuator_controls", t, sim.controls))
        if self.moving and rates["tf_rate"].due(t):
            T = sim.link_transforms()
            edges = []
            for parent, child, parent_link, child_link, child_pose in self.moving:
                Tc = T[child_link] if child_pose is None else T[child_link] @ child_pose
                edges.append((t, parent, child, Tc if parent_link is None else np.linalg.solve(T[parent_link], Tc)))
            work.append(("tf", edges))
        readings = sim.readings()
        for name, r in readings.items():
            if self._last.get(name) is not r:
                self._last[name] = r
                if name in self.merged:
                    topic, acc, gyro = self.merged[name]
                    if name == acc.name:         # both sample together: one Imu per instant
                        work.append(("imu", topic, acc, gyro, r, readings.get(gyro.name)))
                elif hil_ is not None and name in hil_.sources:
                    dev = sim.devices[name]
                    work.append(("reading", dev, r, "/sim"))
                    real = hil_.real_value(name, r, t)
                    if real is not None:
                        work.append(("reading", dev, Reading(r.stamp, r.frame, real), ""))
                else:
                    work.append(("reading", sim.devices[name], r, ""))
                if hil_ is not None and name in hil_.emulators:
                    hil_.emulators[name].submit(r.values, r.stamp, name)
        if rates["diagnostics_rate"].due(t):
            work.append(("diagnostics", t, self.runner_stats()))
        if work:
            self.publish_job(lambda: self._write(work))
        self.controller.apply(sim)

    def _send(self, key, data, stamp):
        handle = self.pubs.get(key)
        if handle is not None:       # None: its model was deleted after this step was collected
            self.transport.publish(handle, data, msg.to_nanoseconds(stamp))

    def _write(self, work):
        for item in work:
            kind = item[0]
            if kind == "clock":
                self._send("clock", msg.clock(item[1]), item[1])
            elif kind == "joint_states":
                _, t, q, v, tau, names = item      # the names of that step (a spawn may change them)
                self._send("joint_states", msg.joint_state(t, names, q, v, tau), t)
            elif kind == "actuator_controls":
                _, t, controls = item
                self._send("actuator_controls/state", msg.joint_state(t, self.actuator_names, effort=controls), t)
            elif kind == "tf":
                self._send("tf", msg.tf_message(item[1]), item[1][0][0])
            elif kind == "reading":
                self._write_reading(item[1], item[2], item[3])
            elif kind == "imu":
                _, topic, acc, gyro, ra, rg = item
                g = rg.values if rg is not None and abs(rg.stamp - ra.stamp) < 1e-9 else None
                self._send(topic, msg.imu(ra.stamp, self.frame(acc.frame), accel=ra.values, gyro=g,
                                          accel_variance=acc.variance, gyro_variance=gyro.variance), ra.stamp)
            elif kind == "diagnostics":
                self._send("diagnostics", msg.diagnostics(item[1], self._statuses(item[2])), item[1])

    def _write_reading(self, dev, r, suffix=""):
        """suffix: "" for the sensor's topic, "/sim" for the simulated value beside a real device."""
        frame, stamp, key = self.frame(r.frame), r.stamp, dev.name + suffix
        if dev.kind == "accelerometer":
            self._send(key, msg.imu(stamp, frame, accel=r.values, accel_variance=dev.variance), stamp)
        elif dev.kind == "gyro":
            self._send(key, msg.imu(stamp, frame, gyro=r.values, gyro_variance=dev.variance), stamp)
        elif dev.kind == "force":
            self._send(key, msg.wrench(stamp, frame, r.values), stamp)
        elif dev.kind == "range":
            self._send(key, msg.laser_scan(stamp, frame, r.values, dev.angle_min, dev.angle_increment,
                                                dev.angle_max, dev.range_min, dev.range_max, dev.scan_time), stamp)
        elif dev.kind == "camera":
            info = msg.camera_info(stamp, frame, dev.width, dev.height, dev.fx, dev.fy, dev.cx, dev.cy)
            if r.values.color is not None:
                self._send(dev.name + "/image_raw", msg.image(stamp, frame, r.values.color), stamp)
                self._send(dev.name + "/camera_info", info, stamp)
            if r.values.depth is not None:
                self._send(dev.name + "/depth/image_raw", msg.image(stamp, frame, r.values.depth), stamp)
                self._send(dev.name + "/depth/camera_info", info, stamp)
                if dev.points:
                    self._send(dev.name + "/points", msg.point_cloud(stamp, frame, r.values.depth, dev.fx, dev.fy,
                                                                     dev.cx, dev.cy), stamp)

    def _statuses(self, stats):
        rtf_target = float(self.config.get("real_time_factor", 1.0))
        rtf = stats.get("rtf_recent", stats.get("rtf"))
        level = 0
        message = "running"
        if rtf is not None and rtf_target > 0 and rtf < 0.9 * rtf_target:
            level, message = 1, f"slower than real time x{rtf_target:g}"
        values = {k: f"{v:.4g}" if isinstance(v, float) else str(v) for k, v in stats.items()}
        if self.actuator_names:
            values["actuators_enabled"] = str(self.sim.actuators_enabled).lower()
        out = [("mbsim: simulation", level, message, values)]
        for name, r in list(self._last.items()):
            dev = self.sim.devices[name]
            sat = getattr(r, "saturated", False)
            out.append((f"mbsim: {name}", 1 if sat else 0, "saturated" if sat else "ok",
                        {"kind": dev.kind, "rate": f"{dev.rate:g}", "stamp": f"{r.stamp:.6f}"}))
        if self.hil is not None:
            out += self.hil.statuses()
        return out
