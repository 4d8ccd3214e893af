"""Simulation state and sensor readings -> ROS 2 topics on any transport; commands -> sim.tau.

Topics (NS = the namespace, by default the first model's name):
  NS/joint_states (JointState, one entry per DOF of every joint with one coordinate per DOF),
  NS/robot_description (String, transient local; one per model, NS/<model>/robot_description
  for the models after the first), NS/<sensor> (Imu, WrenchStamped, LaserScan), NS/<camera>/
  image_raw, camera_info, depth/image_raw, depth/camera_info, points; /tf, /tf_static, /clock,
  /diagnostics. Inputs: NS/joint_commands (JointState: per joint position and/or velocity
  tracked by PD gains and/or effort; JointController says how empty, NaN and short arrays
  read), NS/joint_efforts (Float64MultiArray, every DOF in model order). joint_states and
  joint_commands are the state and command topics of ros2_control's topic-based hardware
  interfaces (joint_states_topic / joint_commands_topic rename them; config/ros2_control.yaml).
Actuators and inputs (when the models have them): NS/actuator_controls (JointState: name =
actuator names, effort = their controls, e.g. OpenSim excitations; the actuator's force is gain *
control), NS/inputs (JointState: name = input names, position = values, read by `input`
functions: Chrono CONTROLLER functions); names not in the models are reported once and ignored;
values hold until the next message. NS/actuator_controls/state (JointState, effort = the
controls in force) at joint_state_rate. JointState because it is the standard message of named
values (no new dependency; `ros2 topic pub` and rqt publish it).
Hardware in the loop (ros/hil_topics.py): a sensor with a real device keeps its topic, which carries
the device's values, and gets NS/<sensor>/sim with the simulated ones; emulated sensors are
written to serial ports; joint commands also come from serial ports.
Names (joint_states, frame ids, sensor topics) are world names (model/names.py): a model's own,
"<entity>/<name>" where an earlier model has the name. Models spawned or deleted while running
(Session.spawn/delete -> world_changed) gain or lose their topics, descriptions and frames.
A model spawned with a namespace (Bridge.namespaces) has its sensor topics (<ns>/<its sensor
name>), <ns>/robot_description and <ns>/joint_states (its own joints; they stay in
NS/joint_states too) under it; its frames keep their world names.
TF: frame ids are the links' world names (with the frame prefix); a floating base is odom ->
root link with a static world -> odom; other roots hang from world; fixed joints, sensor
frames, camera optical frames and range laser frames are static. A moving joint with a
child_pose ends at the URDF's `<joint>_child_frame` link (formats.urdf.joint_frame_links), with
a static child_frame -> child link, so TF has every link the URDF has (but the intermediate
links of joints written as chains).
Every message is built once and serialized once; building and writing run in `publish` (an
AsyncPublisher's submit, so the physics thread never waits on a transport), or inline. The
periodic messages (clock, joint states, TF, Imu, wrench, scans, camera info, image headers) are
preallocated CDR templates (ros/templates.py) written in place, never message objects. On a bag,
alone or beside a live transport, the clock, joint_states, /tf and the kinematic sensors without
a delay, real device or emulation (the messages of every step or every few) are filled and
recorded in the physics thread by one compiled call a step (bag_lane.Lane), straight into the pending
chunk: the same messages, byte for byte; beside it a live transport gets them only while it has
subscribers to them (FanoutTransport).
Lazy publishing: on a live transport a topic nobody subscribes to is not serialized, and a
sensor none of whose topics has a subscriber is not sampled (not rendered, ray-cast or
evaluated) until one comes; each topic's subscribers are looked at every 0.1 s of simulation
time, a few topics a step (`_look`; `refresh_subscribers` looks at all at once). A bag (and
"none") counts as a subscriber to everything; sensors with a real device or a serial emulation
always sample.
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
from ..sensors.devices import Arrivals
from ..run.config import RATES
from ..run.control import joint_dofs
from . import bag_kernels, diagnostics, hil_topics
from . import messages as msg
from . import templates as tpl
from .inputs import Inputs
from .qos import CLOCK, DEFAULT, LATCHED, SENSOR, TF


def ros_name(text: str) -> str:
    """A valid ROS name segment from a model or sensor name."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return name if name and not name[0].isdigit() else "_" + name


# their bits in templates.due_rates' mask (RATES' order), and the look at subscribers' (10 Hz)
_JOINT_STATES, _TF, _CLOCK, _DIAGNOSTICS, _SUBSCRIBERS = (1 << k for k in range(len(RATES) + 1))
# what the messages' kernels need compiled before the clock starts (run.world.simulation's warm_up_jobs)
WARM_UP_JOBS = (("TF poses", tpl.compile_tf_kernels), ("bag recording", bag_kernels.compile_lane_kernels))


def check_rate(key, hz):
    """ValueError unless `key` is one of RATES and hz a rate in Hz > 0."""
    if key not in RATES or not (math.isfinite(float(hz)) and float(hz) > 0):
        raise ValueError(f"{key} = {hz}: expected one of {', '.join(RATES)} with a rate in Hz > 0")


_KINEMATIC = frozenset(("accelerometer", "gyro", "force"))
_BOUND = _KINEMATIC | {"camera"}       # the kinds whose messages a writer bound once per device writes
_FIXED_KEYS = ("clock", "tf", "tf_static", "diagnostics", "joint_states", "actuator_controls/state")


def _welded_where_placed(model, place):
    """The model whose fixed root joints carry its placement in the world: its description's
    weld to "world" (to_urdf) then says what /tf_static says."""
    if np.array_equal(place, np.eye(4)) or not any(j.parent is None and j.type == "fixed" for j in model.joints):
        return model
    import copy
    out = copy.deepcopy(model)
    for j in out.joints:
        if j.parent is None and j.type == "fixed":
            j.origin = place @ j.origin
    return out


def _derived(entity, world_base, bare_base, name):
    """A frame named after one of an entity's things (`name`, derived from `bare_base`) is
    qualified like that thing's world name `world_base`."""
    return entity + "/" + name if world_base != bare_base else name


class Bridge:
    """Publishes one Simulation (mbsim_ros.sensors.Simulation) on `transport`: a listener of a
    run.Session (start, on_step, on_reset, on_world_changed, flush, worker_threads, close).

    config: the run configuration (run/config.py). Started by a Session, built jobs run through
    its publish (an AsyncPublisher's when paced), commands reach its joint control between steps
    and the hardware in the loop stamps on its clock. Started without one (start(), a test
    stepping by hand and calling on_step), jobs run inline and commands are refused (logged)."""

    def __init__(self, sim, transport, config, log=None):
        self.sim = sim
        self.transport = transport
        self.config = config
        self.session = None
        self.publish_job = lambda job: job()
        self.submit = lambda fn: fn()
        self.log = log or (lambda text: None)
        given = (config.namespace or "").strip("/")     # a valid ROS namespace (config checks it)
        self.ns = "/" + "/".join(ros_name(p) for p in given.split("/")) if given else "/" + ros_name(sim.entities[0])
        self._first = sim.entities[0]
        self.namespaces = {}                # entity -> "/its/namespace": a spawned model's own topics
        self.prefix = config.frame_prefix
        # RATES and the look at subscribers: each due at k / rate on the simulation clock
        self.rate_period = np.array([1.0 / min(hz, 1.0 / sim.dt) for hz in [float(getattr(config, key)) for key in RATES] + [10.0]])
        self.rate_k = np.zeros(len(RATES) + 1, np.int64)
        self._layout()
        self.actuator_names = list(sim.actuator_names)
        self.input_names = list(sim.input_names)
        self.inputs = Inputs(self)          # joint commands, efforts, actuator controls, inputs -> session calls
        self.runner_stats = lambda: {}      # the session's live statistics once started by one
        self._last = {}
        self.pubs = {}
        self.templates = {}                 # publication key -> its CDR template (built on first use)
        self._batch = []                    # the messages _write fills, for the transport at once
        self._stamp = (None, 0)             # (seconds, nanoseconds) of the last stamp converted
        self.wanted = {}                    # publication key -> someone subscribes (lazy publishing)
        self._python_due = -1               # the rates' bits whose messages on_step builds (-1: not known yet)
        self.live = getattr(transport, "receives", False)    # subscribers come and go (lazy publishing)
        self.lane = None                    # bag_lane.Lane recording the clock, joint states, /tf, kinematic sensors
        self._lane_tf = None                # (its /tf values, each edge's first index there) when it records /tf
        self._collected = None              # the devices whose readings on_step collects (None: all)
        self._arrivals = Arrivals()         # set when one of them gets a reading (all of them share it)
        self._quiet_until = -math.inf       # before then, nothing pending of theirs comes due
        self._collect_from(None)
        self._lane_keys = frozenset()       # the publication keys the lane records
        self._lane_devices = frozenset()    # the names of the devices whose messages it records
        self._keys_of = {}                  # device name -> its publication keys (device_keys)
        self._devices_of = {}               # publication key -> the devices it carries readings of
        self._looking = []                  # (key, handle) still to look at for subscribers, last first
        self._look_size = 1                 # how many of them a step
        self.errors = []
        self.hil = None                     # the hardware in the loop (ros/hil_topics.py), made by start()

    # -- layout -----------------------------------------------------------------------------
    def frame(self, name):
        return self.prefix + name

    def _layout(self):
        """DOFs for joint_states, the TF tree (static and moving edges), devices' topics; every
        name is the world name (model/names.py: the first model's bare, a later model's
        "<entity>/<name>" where it clashes)."""
        self._python_due = -1                # until refresh_subscribers knows the new world's
        sim = self.sim
        names = sim.names
        self.dofs = joint_dofs(sim)          # (DOF name, q index, v index, joint name)
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
        names = sim.compiled.link_names
        n = len(self.moving)
        parent = np.array([-1 if m[2] is None else names.index(m[2]) for m in self.moving], dtype=np.int64)
        child = np.array([names.index(m[3]) for m in self.moving], dtype=np.int64)
        child_R = np.tile(np.eye(3), (n, 1, 1))
        child_p = np.zeros((n, 3))
        for e, m in enumerate(self.moving):
            if m[4] is not None:
                child_R[e], child_p[e] = m[4][:3, :3], m[4][:3, 3]
        # the TF layout: frame pairs, and per edge the parent and child link index and the child
        # frame in its link (tf_values' arguments)
        self.tf_layout = ([m[:2] for m in self.moving], parent, child, child_R, child_p)
        self.dof_names = [d[0] for d in self.dofs]
        # a namespaced entity's joint_states: its DOFs' (q indices, v indices, names)
        self.namespaced_dofs = {}
        for k, entity in enumerate(sim.entities):
            if entity in self.namespaces:
                _, q_off, v_off = sim.compiled.offsets[k]
                q_end = q_off + sim.models[k].nq
                mine = [d for d in self.dofs if q_off <= d[1] < q_end]
                self.namespaced_dofs[entity] = (np.array([d[1] for d in mine], dtype=int),
                                                np.array([d[2] for d in mine], dtype=int), [d[0] for d in mine])
        self.dof_q = np.array([d[1] for d in self.dofs], dtype=int)
        self.dof_v = np.array([d[2] for d in self.dofs], dtype=int)
        # accelerometer + gyro pairs merged into one Imu per link (same pose only)
        self.merged = {}
        if self.config.merge_imu:
            real = set(self.config.devices or {})     # keep their own topics (and /sim)
            devs = [d for d in sim.devices.values() if d.name not in real]
            for a in (d for d in devs if d.kind == "accelerometer"):
                g = next((d for d in devs if d.kind == "gyro" and d.link == a.link and d.rate == a.rate
                          and d.delay == a.delay and np.allclose(d.sensor.pose, a.sensor.pose)), None)
                if g is not None:
                    self.merged[a.name] = (a.link + "_imu", a, g)
                    self.merged[g.name] = self.merged[a.name]

    def named_topic(self, key):
        """The topic a configuration key names: absolute as given, else under the namespace."""
        name = getattr(self.config, key) or key[:-len("_topic")]
        return name if name.startswith("/") else self.topic(name)

    def topic(self, *parts):
        """NS/<name>/<rest>: the name (a world name, perhaps "<entity>/<thing>") made of valid
        segments; the rest as given."""
        head = "/".join(ros_name(seg) for seg in parts[0].split("/"))
        return "/".join([self.ns, head] + list(parts[1:]))

    def model_topic(self, entity, world_name, bare_name, *rest):
        """The topic of one of a model's things: NS/<world name>/<rest>, or <its namespace>/
        <bare name>/<rest> for a model spawned with a namespace (self.namespaces)."""
        ns = self.namespaces.get(entity)
        if ns is None:
            return self.topic(world_name, *rest)
        return "/".join([ns, ros_name(bare_name)] + list(rest))

    def _description_topic(self, entity):
        """The first model's robot_description is NS/robot_description; another's
        NS/<entity>/robot_description (kept for the run, whoever joins or leaves), or
        <its namespace>/robot_description."""
        if entity in self.namespaces:
            return self.namespaces[entity] + "/robot_description"
        return self.topic("robot_description") if entity == self._first else self.topic(entity, "robot_description")

    # -- start / stop -----------------------------------------------------------------------
    def start(self, session=None):
        """Advertise every topic, publish robot_description and /tf_static, subscribe inputs;
        with `session`, publish through it, command its joints, and open the hardware in the
        loop (ConfigError for a bad devices:/emulate:/commands: entry)."""
        t, sim = self.transport, self.sim
        if session is not None:
            self.session = session
            self.publish_job = session.publish
            self.submit = session.submit
            self.runner_stats = session.live_stats
            self.namespaces = session.namespaces
        if hil_topics.configured(self.config):
            if session is None:
                raise ValueError("hardware in the loop (devices:, emulate:, commands:) runs under a Session")
            self.hil = hil_topics.Hil(sim, self.config, self, session.hil_clock)
        adv = self.pubs
        adv["clock"] = t.advertise("/clock", msg.CLOCK, CLOCK)
        adv["tf"] = t.advertise("/tf", msg.TF_MESSAGE, TF)
        adv["tf_static"] = t.advertise("/tf_static", msg.TF_MESSAGE, LATCHED)
        adv["diagnostics"] = t.advertise("/diagnostics", msg.DIAGNOSTIC_ARRAY, DEFAULT)
        adv["joint_states"] = t.advertise(self.named_topic("joint_states_topic"), msg.JOINT_STATE, DEFAULT)
        if self.actuator_names:
            adv["actuator_controls/state"] = t.advertise(self.topic("actuator_controls", "state"), msg.JOINT_STATE, DEFAULT)
        self._advertise_models()
        self.inputs.subscribe(t)
        if self.hil is not None:
            self.hil.start(t)
        self._build_lane()
        self.refresh_subscribers()
        self.on_step(sim)              # the initial state at t

    def device_keys(self, dev):
        """The publication keys (self.pubs) that carry a device's readings."""
        if dev.name in self.merged:
            return [self.merged[dev.name][0]]
        keys = [k for k in (dev.name, dev.name + "/sim", dev.name + "/image_raw", dev.name + "/camera_info",
                            dev.name + "/depth/image_raw", dev.name + "/depth/camera_info", dev.name + "/points")
                if k in self.pubs]
        return keys

    def refresh_subscribers(self):
        """Lazy publishing: which topics have a subscriber now; a sensor without any stops
        sampling, and starts again (on its own schedule) when one comes. On a transport that
        is not live (bag, "none") everything counts as subscribed. What a lane records is
        wanted only by the live transports' subscribers beside it (a fan-out does not count the
        bag for them); its sensors always sample, and on_step collects their readings only
        while a topic of theirs is wanted. This looks at every topic at once (the start, a
        world change); running, on_step looks at a few topics a step (_look)."""
        t = self.transport
        recorded = self._lane_keys
        self.wanted = {key: t.subscriber_count(h) > 0 if self.live else key not in recorded
                       for key, h in self.pubs.items()}
        self._keys_of = {dev.name: self.device_keys(dev) for dev in self.sim.devices.values()}
        self._devices_of = {}
        for dev in self.sim.devices.values():
            for key in self._keys_of[dev.name]:
                self._devices_of.setdefault(key, []).append(dev)
        self._looking = []
        self._update_devices(self.sim.devices.values())
        self._python_due = self._due_in_python()

    def _due_in_python(self):
        """The bits of the rates' due mask at which on_step has messages of its own to build
        (a superset: those a lane records are not wanted here), so that at the other steps a
        lane's call is all it does."""
        wanted = self.wanted
        bits = _SUBSCRIBERS if self.live else 0
        if wanted.get("clock"):
            bits |= _CLOCK
        if (wanted.get("joint_states") or any(wanted.get(f"joint_states/{e}") for e in self.namespaced_dofs)
                or (self.actuator_names and wanted.get("actuator_controls/state"))):
            bits |= _JOINT_STATES
        if self.moving and wanted.get("tf"):
            bits |= _TF
        if wanted.get("diagnostics"):
            bits |= _DIAGNOSTICS
        return bits

    def _look(self):
        """Part of the look at the subscribers that on_step starts every 0.1 s of simulation time:
        as many topics a step as spread it over that time (one a step for the bundled world's
        20), each topic's sensors updated when its subscribers came or went. A live transport's
        count is a call into the middleware that holds the interpreter: all of them at once
        took the physics thread ~0.15 ms, and with a bag's threads beside it, waiting for the
        interpreter back, 0.5 to over 1 ms (most of such a run's late steps)."""
        looking, t, wanted = self._looking, self.transport, self.wanted
        changed = []
        for key, handle in looking[-self._look_size:]:
            has = t.subscriber_count(handle) > 0
            if has != wanted.get(key, has):
                wanted[key] = has
                changed += self._devices_of.get(key, ())
                self._python_due = self._due_in_python()
        del looking[-self._look_size:]
        if changed:
            self._update_devices(changed)

    def _update_devices(self, devices):
        """Each of `devices` idle or sampling, and collected by on_step or not, as self.wanted says."""
        step = int(round(self.sim.t / self.sim.dt))
        always = set(self.hil.sources) | set(self.hil.emulators) if self.hil is not None else set()
        laned = self._lane_devices
        for dev in devices:
            keys = self._keys_of.get(dev.name, ())
            if dev.name not in always:
                dev.set_idle(bool(keys) and not any(self.wanted[k] for k in keys) and dev.name not in laned, step)
        if self.lane is None:
            self._collect_from(None)
            return
        collected = []
        for dev in self.sim.devices.values():
            if dev.name not in laned or any(self.wanted[k] for k in self._keys_of.get(dev.name, ())):
                collected.append(dev)
                if self._collected is not None and dev not in self._collected and dev.latest is not None:
                    self._last[dev.name] = dev.latest     # from now on, not the readings the lane recorded
        self._collect_from(collected)

    def _collect_from(self, devices):
        """on_step collects the readings of `devices` from now on (None: every device's). They
        share the Arrivals that tells it when to look; the others get their own."""
        self._collected = devices
        mine = self.sim.devices.values() if devices is None else devices
        for dev in self.sim.devices.values():
            dev.arrivals = Arrivals()
        for dev in mine:
            dev.arrivals = self._arrivals
        self._arrivals.new = True

    def on_reset(self, sim):
        """After the simulation went back to t = 0 (in the physics thread): every rate counts
        from 0 again, so each topic flows from the first step on."""
        self.rate_k[:] = 0

    def set_rate(self, key, hz):
        """Change one of RATES (Hz > 0; capped at the physics rate) from the next step on; call
        it in the physics thread (a Runner's submit)."""
        check_rate(key, hz)
        hz = float(hz)
        i = RATES.index(key)
        self.rate_period[i] = period = 1.0 / min(hz, 1.0 / self.sim.dt)
        self.rate_k[i] = int(math.floor(self.sim.t / period + 1e-9)) + 1    # due at the next multiple
        setattr(self.config, key, hz)

    def _model_topics(self):
        """{key: (topic, type, qos)} of what the world's models publish: descriptions, sensors."""
        sim = self.sim
        out = {f"robot_description/{e}": (self._description_topic(e), msg.STRING, LATCHED) for e in sim.entities}
        for entity in self.namespaced_dofs:
            out[f"joint_states/{entity}"] = (self.namespaces[entity] + "/joint_states", msg.JOINT_STATE, DEFAULT)
        for dev in sim.devices.values():
            if not dev.enabled:
                continue

            def topic(*rest, dev=dev):
                return self.model_topic(dev.entity, dev.name, dev.sensor.name, *rest)
            if dev.name in self.merged:
                key = self.merged[dev.name][0]
                acc = self.merged[dev.name][1]
                out[key] = (self.model_topic(dev.entity, key, acc.sensor.link + "_imu"), msg.IMU, SENSOR)
            elif dev.kind in ("accelerometer", "gyro"):
                out[dev.name] = (topic(), msg.IMU, SENSOR)
            elif dev.kind == "force":
                out[dev.name] = (topic(), msg.WRENCH_STAMPED, SENSOR)
            elif dev.kind == "range":
                out[dev.name] = (topic(), msg.LASER_SCAN, SENSOR)
                out[dev.name + "/points"] = (topic("points"), msg.POINT_CLOUD2, SENSOR)
            elif dev.kind == "camera":
                parts = []
                if dev.color:
                    parts += [("image_raw", msg.IMAGE), ("camera_info", msg.CAMERA_INFO)]
                if dev.depth:
                    parts += [("depth/image_raw", msg.IMAGE), ("depth/camera_info", msg.CAMERA_INFO)]
                    if dev.points:
                        parts.append(("points", msg.POINT_CLOUD2))
                for sub, typename in parts:
                    out[dev.name + "/" + sub] = (topic(sub), typename, SENSOR)
            if self.hil is not None and dev.name in self.hil.sources:   # the simulated value beside the real one
                out[dev.name + "/sim"] = (topic("sim"), out[dev.name][1], SENSOR)
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
        for entity, model, place in zip(sim.entities, sim.models, sim.compiled.placements):
            if f"robot_description/{entity}" in new:
                description = to_urdf(_welded_where_placed(renamed(model, sim.names, entity), place))
                t.publish(adv[f"robot_description/{entity}"], msg.string(description), msg.to_nanoseconds(stamp))
        t.publish(adv["tf_static"], msg.tf_message([(stamp, p, c, T) for p, c, T in self.static]),
                  msg.to_nanoseconds(stamp))

    def on_world_changed(self, sim):
        """After sim.add_model / remove_model / set_model_pose (between steps, in the physics
        thread): lay the world out again, advertise the new models' topics and descriptions,
        unadvertise those of models that left, republish /tf_static."""
        self._layout()
        self._advertise_models()
        for name in list(self._last):
            if name not in self.sim.devices:
                del self._last[name]
        self._build_lane()
        self.refresh_subscribers()         # the new topics' subscribers; new sensors idle if none

    def _build_lane(self):
        """Where the transport records a Lane (a bag): the clock, joint_states, /tf and every
        kinematic sensor without a delay, a real device or a serial emulation go into one, filled
        and recorded by one compiled call a step, which also gives the step's due mask (bag_lane.Lane;
        /tf's values computed when it stops before /tf, at the steps it is due); on_step collects
        the other devices' readings, and the lane's while a live transport beside the bag has
        subscribers to them (refresh_subscribers)."""
        old, self.lane, self._lane_tf = self.lane, None, None
        self._collect_from(None)
        self._lane_keys, self._lane_devices = frozenset(), frozenset()
        make = getattr(self.transport, "lane", None)
        if old is not None:
            self.transport.drop_lane(old)
        if make is None:
            return
        sim, pubs = self.sim, self.pubs
        js = tpl.JointStateTemplate(self.dof_names)
        clock = tpl.ClockTemplate()
        # (publication, template, sensor slot or -1, due bit, gathers: (offset in the message,
        # source, index) with sources 0-4 = q, v, tau, the sensors' values, /tf's values
        # (bag_lane.LANE_SOURCES), the stamps' offsets in the message)
        members = [(pubs["clock"], clock, -1, _CLOCK.bit_length() - 1, [], [4 + clock.stamp_at]),
                   (pubs["joint_states"], js, -1, _JOINT_STATES.bit_length() - 1,
                    [(js.position_at + 8 * k, 0, int(i)) for k, i in enumerate(self.dof_q)]
                    + [(js.velocity_at + 8 * k, 1, int(i)) for k, i in enumerate(self.dof_v)]
                    + [(js.effort_at + 8 * k, 2, int(i)) for k, i in enumerate(self.dof_v)], [4 + js.stamp_at])]
        tf_values = np.zeros(0)
        if self.moving:         # each edge's (x, y, z, qx, qy, qz, qw) from tf_values, in order
            tf = tpl.TfTemplate(self.tf_layout[0])
            tf_values = np.zeros(7 * len(self.moving))
            members.append((pubs["tf"], tf, -1, _TF.bit_length() - 1,
                            [(4 + 8 * (int(at) + j), 4, 7 * e + j) for e, at in enumerate(tf.value_index)
                             for j in range(7)], [4 + 4 * int(s) for s in tf.stamp_index]))
        other = set(self.hil.sources) | set(self.hil.emulators) if self.hil is not None else set()
        slot, readings, stamps, counts = sim.kinematic_samples
        lane_devices = set()

        def values(at, dev):
            return [(at + 8 * c, 3, 6 * slot[dev.name] + c) for c in range(3 if dev.kind != "force" else 6)]
        for dev in sim.devices.values():
            if dev.kind not in _KINEMATIC or dev.delay != 0 or dev.name in other or not dev.enabled:
                continue
            if dev.name in self.merged:
                topic, acc, gyro = self.merged[dev.name]
                if dev is not acc or not gyro.enabled or gyro.name in other:
                    continue            # (acc and gyro have the same rate and delay: merged so)
                tmpl = tpl.ImuTemplate(self.frame(acc.frame), accel=True, gyro=True, accel_variance=acc.variance,
                                       gyro_variance=gyro.variance)
                members.append((pubs[topic], tmpl, slot[acc.name], 0,
                                values(tmpl.accel_at, acc) + values(tmpl.gyro_at, gyro), [4 + tmpl.stamp_at]))
                lane_devices |= {acc.name, gyro.name}
            elif dev.name in pubs:
                tmpl = self._kinematic_template(dev, self.frame(dev.frame))
                at = tmpl.values_at if dev.kind == "force" else tmpl.accel_at if dev.kind == "accelerometer" else tmpl.gyro_at
                members.append((pubs[dev.name], tmpl, slot[dev.name], 0, values(at, dev), [4 + tmpl.stamp_at]))
                lane_devices.add(dev.name)
        prepare = (_TF, self._lane_tf_values) if self.moving else None
        self.lane = make(members, (sim.q, sim.v, sim.tau, readings, tf_values), counts, stamps,
                         (self.rate_period, self.rate_k), prepare)
        if self.lane is not None:
            self._lane_keys = frozenset(key for key, h in pubs.items() if any(h is m[0] for m in members))
            self._lane_devices = frozenset(lane_devices)
            self._collect_from([d for d in sim.devices.values() if d.name not in lane_devices])
            if self.moving:
                self._lane_tf = (tf_values, 7 * np.arange(len(self.moving)))

    def _lane_tf_values(self):
        """The lane's /tf values at the current state (before it records /tf)."""
        R, p = self.sim.link_poses()
        tpl.tf_values(R, p, *self.tf_layout[1:], *self._lane_tf)

    def set_source(self, sensor: str, source: str) -> str:
        """Put sensor's real device ("real") or the simulation ("sim") on its topic (a sensor
        with a devices: entry); returns what the topic now carries. ValueError for a sensor
        without a real device or an unknown source."""
        if self.hil is None:
            raise ValueError("set_source: the configuration has no devices: section")
        return self.hil.set_source(sensor, source)

    def worker_threads(self):
        """The transport's threads that the physics waits for (real-time priority beside it)."""
        return self.transport.worker_threads()

    def close(self):
        """Stop what start() started (serial ports and their threads), then close the transport
        (a bag writes its summary here)."""
        if self.hil is not None:
            self.hil.close()
        self.transport.close()

    def report(self, error):
        """An input error: kept (the first 100, Bridge.errors) and logged."""
        if error:
            if len(self.errors) < 100:
                self.errors.append(error)
            self.log(error)

    # -- every step -------------------------------------------------------------------------
    def on_step(self, sim):
        """After a step: collect what is due (copies of the state, new readings) in the physics
        thread, hand building and writing to publish_job; then set tau for the next step."""
        t = sim.t
        lane = self.lane
        if lane is not None:       # records the clock, joint_states, /tf, kinematic sensors; gives the due mask
            due = lane.record(t)
            if not (due & self._python_due or self._arrivals.new or t >= self._quiet_until or self._looking):
                return                          # the lane recorded all there was (most steps)
        else:
            due = tpl.due_rates(self.rate_period, self.rate_k, t)
        work = []
        wanted = self.wanted
        if self.live:
            if due & _SUBSCRIBERS:         # a look at every topic, spread over the next 0.1 s
                self._looking = list(reversed(self.pubs.items()))
                self._look_size = -(-len(self._looking) // max(1, round(self.rate_period[-1] / sim.dt)))
            if self._looking:
                self._look()
        if due & _CLOCK and wanted["clock"]:
            work.append(("clock", t))
        if due & _JOINT_STATES:
            if wanted["joint_states"]:
                work.append(("joint_states", "joint_states", t, sim.q[self.dof_q], sim.v[self.dof_v],
                             sim.tau[self.dof_v], self.dof_names))    # the names of that step (a spawn may change them)
            for entity, (iq, iv, names) in self.namespaced_dofs.items():
                key = f"joint_states/{entity}"
                if wanted.get(key):
                    work.append(("joint_states", key, t, sim.q[iq], sim.v[iv], sim.tau[iv], names))
            if self.actuator_names and wanted.get("actuator_controls/state"):
                work.append(("actuator_controls", t, sim.controls))
        if due & _TF and self.moving and wanted["tf"]:
            R, p = sim.link_poses()
            work.append(("tf", t, R.copy(), p.copy(), self.tf_layout))
        self._collect_readings(sim, t, work)
        if due & _DIAGNOSTICS and wanted["diagnostics"]:
            work.append(("diagnostics", t, self.runner_stats))     # evaluated off the physics thread
        if work:
            self.publish_job(lambda: self._write(work))

    def _collect_readings(self, sim, t, work):
        """Every reading made visible since the last look, each once, in order, as work items
        (frames from a render thread may arrive several at a time)."""
        arrivals = self._arrivals
        if not arrivals.new and t < self._quiet_until:
            return         # nothing arrived since the last look, nothing it saw pending is due
        arrivals.new = False         # before looking: what arrives while we look sets it again
        hil_, templates = self.hil, self.templates
        devices = sim.devices.values() if self._collected is None else self._collected
        due = math.inf
        for dev in devices:          # every device's first (a merged Imu looks at its gyro's)
            if dev.pending:
                dev.visible(t)
                if dev.pending:
                    due = min(due, dev.pending[0].stamp + dev.delay)
        self._quiet_until = due - 1e-9       # (as Device.visible compares)
        seen = self._last
        for dev in devices:
            newest = dev.latest
            name = dev.name
            last = seen.get(name)
            if last is newest or newest is None:
                continue
            seen[name] = newest
            for r in dev.shown_after(last) or (newest,):
                if name in self.merged:
                    topic, acc, gyro = self.merged[name]
                    if name == acc.name:         # both sample together: one Imu per instant
                        g = next((x for x in reversed(gyro.shown) if abs(x.stamp - r.stamp) < 1e-9), None)
                        work.append(("imu", topic, acc, gyro, r, g))
                elif hil_ is not None and name in hil_.sources:
                    work.append(("reading", dev, r, "/sim"))
                    real = hil_.real_value(name, r, t)
                    if real is not None:
                        work.append(("reading", dev, Reading(r.stamp, r.frame, real), ""))
                elif dev.kind in _BOUND:         # the most frequent: its writer, bound once
                    entry = templates.get(name)      # (self.template inlined: no closure per reading)
                    if entry is None or entry[0] is not dev:
                        entry = templates[name] = (dev, self._writer(dev, name))
                    work.append((entry[1], r))
                else:
                    work.append(("reading", dev, r, ""))
                if hil_ is not None and name in hil_.emulators:
                    hil_.emulators[name].submit(r.values, r.stamp, name)

    def flush(self, sim):
        """Publish the readings that appeared since the last step (frames a render thread
        finished after it), without stepping: the end of a run at rtf 0 loses nothing."""
        work = []
        self._collect_readings(sim, sim.t, work)
        if work:
            self.publish_job(lambda: self._write(work))

    def _send(self, key, data, stamp):
        self._send_ns(key, data, msg.to_nanoseconds(stamp))

    def _send_ns(self, key, data, ns):
        """Into the batch that _write hands to the transport at once (publishing thread only)."""
        handle = self.pubs.get(key)
        if handle is not None:       # None: its model was deleted after this step was collected
            self._batch.append((handle, data, ns))

    def _ns(self, t):
        """msg.to_nanoseconds(t), converted once per instant (a step's messages share stamps);
        publishing thread only."""
        last_t, ns = self._stamp
        if t != last_t:
            ns = msg.to_nanoseconds(t)
            self._stamp = (t, ns)
        return ns

    def template(self, key, make, source=None):
        """The CDR template of publication `key` (a kinematic sensor's: its writer, see
        _kinematic_writer), made by make() on first use and again when
        `source` (what its layout comes from: the names, the TF layout, the device) is another
        object than last time: a world change lays the world out anew while the publisher may
        still be writing steps collected before it."""
        entry = self.templates.get(key)
        if entry is None or entry[0] is not source:
            entry = self.templates[key] = (source, make())
        return entry[1]

    def _write(self, work):
        self._batch = batch = []
        try:
            self._fill(work)
        finally:
            if batch:
                self.transport.publish_many(batch)

    def _fill(self, work):
        """Each work item's messages, filled, into self._batch."""
        for item in work:
            kind = item[0]
            if kind.__class__ is not str:          # the most frequent: a kinematic sensor's writer
                kind(item[1])
            elif kind == "reading":
                self._write_reading(item[1], item[2], item[3])
            elif kind == "clock":
                ns = self._ns(item[1])
                self._send_ns("clock", self.template("clock", tpl.ClockTemplate).fill(ns), ns)
            elif kind == "joint_states":
                _, key, t, q, v, tau, names = item
                ns = self._ns(t)
                tmpl = self.template(key, lambda: tpl.JointStateTemplate(names), names)
                self._send_ns(key, tmpl.fill(ns, q, v, tau), ns)
            elif kind == "actuator_controls":
                _, t, controls = item
                ns = self._ns(t)
                tmpl = self.template("actuator_controls/state", lambda: tpl.JointStateTemplate(
                    self.actuator_names, position=False, velocity=False), self.actuator_names)
                self._send_ns("actuator_controls/state", tmpl.fill(ns, effort=controls), ns)
            elif kind == "tf":
                _, t, R, p, layout = item
                ns = self._ns(t)
                tmpl = self.template("tf", lambda: tpl.TfTemplate(layout[0]), layout)
                self._send_ns("tf", tmpl.fill(ns, R, p, *layout[1:]), ns)
            elif kind == "imu":
                _, topic, acc, gyro, ra, rg = item
                g = rg.values if rg is not None and abs(rg.stamp - ra.stamp) < 1e-9 else None
                tmpl = self.template((topic, g is not None), lambda: tpl.ImuTemplate(
                    self.frame(acc.frame), accel=True, gyro=g is not None, accel_variance=acc.variance,
                    gyro_variance=gyro.variance), acc)
                ns = self._ns(ra.stamp)
                self._send_ns(topic, tmpl.fill(ns, accel=ra.values, gyro=g), ns)
            elif kind == "diagnostics":
                self._send("diagnostics", msg.diagnostics(item[1], self._statuses(item[2]())), item[1])

    @staticmethod
    def _kinematic_template(dev, frame):
        """The template of an accelerometer's or gyro's Imu, or a force sensor's WrenchStamped."""
        if dev.kind == "force":
            return tpl.WrenchTemplate(frame)
        accel = dev.kind == "accelerometer"
        return tpl.ImuTemplate(frame, accel=accel, gyro=not accel,
                               accel_variance=dev.variance if accel else (0.0,) * 3,
                               gyro_variance=(0.0,) * 3 if accel else dev.variance)

    def _kinematic_fill(self, dev, frame):
        """fill(ns, values) -> bytes of a kinematic sensor's message: its template bound once
        (these publish at up to every step)."""
        fill = self._kinematic_template(dev, frame).fill
        if dev.kind == "force":
            return fill
        if dev.kind == "accelerometer":
            return lambda ns, values: fill(ns, values, None)
        return lambda ns, values: fill(ns, None, values)

    def _kinematic_writer(self, dev, key):
        """write(reading): a kinematic sensor's message on publication `key` (its topic, or its
        "/sim" topic beside a real device) into the batch, if someone wants it."""
        fill = self._kinematic_fill(dev, self.frame(dev.frame))

        def write(r):
            if self.wanted.get(key, False):
                handle = self.pubs.get(key)
                if handle is not None:       # None: its model was deleted after this step was collected
                    ns = self._ns(r.stamp)
                    self._batch.append((handle, fill(ns, r.values), ns))
        return write

    def _write_reading(self, dev, r, suffix=""):
        """suffix: "" for the sensor's topic, "/sim" for the simulated value beside a real device."""
        key = dev.name + suffix
        if dev.kind in _BOUND:
            self.template(key, lambda: self._writer(dev, key), dev)(r)
            return
        frame, stamp = self.frame(r.frame), r.stamp
        wanted, template, send = self.wanted, self.template, self._send_ns
        ns = self._ns(stamp)
        if dev.kind == "range":
            if wanted.get(key, False):      # a 3D lidar's scan: its ring nearest the horizon
                tmpl = template(key, lambda: tpl.LaserScanTemplate(
                    frame, dev.columns, dev.angle_min, dev.angle_increment, dev.angle_max, dev.range_min,
                    dev.range_max, dev.scan_time), dev)
                ring = dev.scan_ring * dev.columns
                send(key, tmpl.fill(ns, r.values[ring:ring + dev.columns]), ns)
            points = dev.name + "/points"
            if not suffix and wanted.get(points, False) and points in self.pubs:
                send(points, msg.lidar_cloud(stamp, frame, r.values, dev.laser_directions, r.intensities), ns)

    def _writer(self, dev, key):
        """The writer bound once of a device whose kind is in _BOUND, for publication `key`."""
        return self._kinematic_writer(dev, key) if dev.kind in _KINEMATIC else self._camera_writer(dev)

    def _camera_writer(self, dev):
        """write(reading): a camera's images, camera infos and point cloud (those someone wants)
        into the batch; its templates made at its first frame, then bound (each frame is four
        messages, whose lookups by key cost the publishing thread as much as their bytes)."""
        name = dev.name
        streams = ((name + "/image_raw", name + "/camera_info"), (name + "/depth/image_raw", name + "/depth/camera_info"))
        points = name + "/points"
        made = {}            # publication key -> its template

        def template(key, make):
            tmpl = made.get(key)
            if tmpl is None:
                tmpl = made[key] = make()
            return tmpl

        def write(r):
            wanted, pubs, batch = self.wanted, self.pubs, self._batch
            frame, stamp = self.frame(r.frame), r.stamp
            ns = self._ns(stamp)
            whole = not self.transport.takes_parts
            for pixels, (image_key, info_key) in zip((r.values.color, r.values.depth), streams):
                if pixels is None:
                    continue
                if wanted.get(image_key, False) and image_key in pubs:
                    tmpl = template(image_key, lambda: tpl.ImageTemplate(frame, *pixels.shape[:2],
                                                                         *msg.image_encoding(pixels)))
                    batch.append((pubs[image_key], tmpl.fill(ns, pixels) if whole else tmpl.parts(ns, pixels), ns))
                if wanted.get(info_key, False) and info_key in pubs:
                    tmpl = template(info_key, lambda: tpl.CameraInfoTemplate(frame, dev.width, dev.height, dev.fx,
                                                                             dev.fy, dev.cx, dev.cy))
                    batch.append((pubs[info_key], tmpl.fill(ns), ns))
            depth = r.values.depth
            if depth is not None and dev.points and wanted.get(points, False):
                self._send(points, msg.point_cloud(stamp, frame, depth, dev.fx, dev.fy, dev.cx, dev.cy), stamp)
        return write

    def _statuses(self, stats):
        return diagnostics.statuses(stats, self.config, self.sim, self.hil) + self.transport.statuses()
