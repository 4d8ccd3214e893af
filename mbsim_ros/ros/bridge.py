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
Models spawned or deleted while running (Session.spawn/delete -> world_changed) gain or lose
their topics, descriptions and frames.

The Bridge coordinates; each job is a module of its own: names, frames and the world's layout
(ros/topic_layout.py), lazy publishing (ros/subscribers.py), which devices sample and the
readings collected (ros/device_sampling.py), the messages built and written
(ros/message_writers.py) and a bag's lane (ros/lane_members.py). Building and writing run in
`publish` (an AsyncPublisher's submit, so the physics thread never waits on a transport), or
inline. On a bag, alone or beside a live transport, the lane records the clock, joint_states,
/tf and the kinematic sensors in the physics thread; beside it a live transport gets them only
while it has subscribers to them (FanoutTransport).
"""
from __future__ import annotations

import math

import numpy as np

from ..run.config import RATES
from . import bag_kernels, diagnostics, hil_topics
from . import messages as msg
from . import templates as tpl
from .device_sampling import ReadingCollector
from .inputs import Inputs
from .lane_members import lane_members
from .message_writers import MessageWriter
from .qos import CLOCK, DEFAULT, LATCHED, TF
from .subscribers import Subscribers
from .topic_layout import (CLOCK_BIT, DIAGNOSTICS_BIT, FIXED_KEYS, JOINT_STATES_BIT, SUBSCRIBERS_BIT, TF_BIT,
                           TopicNames, WorldLayout, check_rate, model_topics, robot_description)

# what the messages' kernels need compiled before the clock starts (run.world.simulation's warm_up_jobs)
TF_WARM_UP = ("TF poses", tpl.compile_tf_kernels)
BAG_WARM_UP = ("bag recording", bag_kernels.compile_lane_kernels)    # only a bag's lane calls these
WARM_UP_JOBS = (TF_WARM_UP, BAG_WARM_UP)


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
        self.names = TopicNames(sim, config)
        self.ns = self.names.ns
        # RATES and the look at subscribers: each due at k / rate on the simulation clock
        self.rate_period = np.array([1.0 / min(hz, 1.0 / sim.dt) for hz in [float(getattr(config, key)) for key in RATES] + [10.0]])
        self.rate_k = np.zeros(len(RATES) + 1, np.int64)
        self.actuator_names = list(sim.actuator_names)
        self.input_names = list(sim.input_names)
        self.pubs = {}
        self.subscribers = Subscribers(transport, self.pubs, self.actuator_names)
        self.writer = MessageWriter(transport, self.pubs, self.subscribers, self.names.frame, self.actuator_names,
                                    self._statuses)
        self.readings = ReadingCollector(sim, self.writer)
        self._layout()
        self.inputs = Inputs(self)          # joint commands, efforts, actuator controls, inputs -> session calls
        self.runner_stats = lambda: {}      # the session's live statistics once started by one
        self.lane = None                    # bag_lane.Lane recording the clock, joint states, /tf, kinematic sensors
        self._lane_tf = None                # (its /tf values, each edge's first index there, tf_values' scratch) when it records /tf
        self._lane_keys = frozenset()       # the publication keys the lane records
        self._lane_devices = frozenset()    # the names of the devices whose messages it records
        self.errors = []
        self.hil = None                     # the hardware in the loop (ros/hil_topics.py), made by start()

    # -- names and layout -------------------------------------------------------------------
    def frame(self, name):
        return self.names.frame(name)

    def topic(self, *parts):
        return self.names.topic(*parts)

    def named_topic(self, key):
        return self.names.named_topic(key)

    @property
    def namespaces(self):
        """entity -> "/its/namespace": a spawned model's own topics (the session's once started)."""
        return self.names.namespaces

    def _layout(self):
        self.subscribers.python_due = -1     # until refresh_subscribers knows the new world's
        self.layout = WorldLayout(self.sim, self.config, self.names.namespaces, self.names.frame)

    # the layout's parts that the hardware in the loop, tests and benchmarks read
    @property
    def dof_names(self):
        return self.layout.dof_names

    @property
    def dof_q(self):
        return self.layout.dof_q

    @property
    def dof_v(self):
        return self.layout.dof_v

    @property
    def moving(self):
        return self.layout.moving

    @property
    def merged(self):
        return self.layout.merged

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
            self.names.namespaces = session.namespaces
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

    def refresh_subscribers(self):
        """Lazy publishing (ros/subscribers.py): which topics have a subscriber now; a sensor
        without any stops sampling, and starts again (on its own schedule) when one comes. What
        a lane records is wanted only by the live transports' subscribers beside it; its
        sensors always sample, and on_step collects their readings only while a topic of theirs
        is wanted. This looks at every topic at once (the start, a world change); running,
        on_step looks at a few topics a step (Subscribers.look)."""
        devices = self.sim.devices.values()
        self.subscribers.refresh(devices, self.layout, self._lane_keys)
        self._update_devices(devices)

    def _update_devices(self, devices):
        self.readings.update_devices(devices, self.subscribers, self._lane_devices, self.lane is not None, self.hil)

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

    def _advertise_models(self):
        """Advertise the models' topics not advertised yet, unadvertise those no model has any
        more; publish the new descriptions (with the world names TF and joint_states use) and the
        whole static TF tree (latched)."""
        t, sim, adv = self.transport, self.sim, self.pubs
        wanted = model_topics(sim, self.names, self.layout, self.hil)
        for key in [k for k in adv if k not in FIXED_KEYS and k not in wanted]:
            t.unadvertise(adv.pop(key))
        new = [k for k in wanted if k not in adv]
        for key in new:
            adv[key] = t.advertise(*wanted[key])
        stamp = sim.t
        for entity, model, place in zip(sim.entities, sim.models, sim.compiled.placements):
            if f"robot_description/{entity}" in new:
                description = robot_description(sim, entity, model, place)
                t.publish(adv[f"robot_description/{entity}"], msg.string(description), msg.to_nanoseconds(stamp))
        t.publish(adv["tf_static"], msg.tf_message([(stamp, p, c, T) for p, c, T in self.layout.static]),
                  msg.to_nanoseconds(stamp))

    def on_world_changed(self, sim):
        """After sim.add_model / remove_model / set_model_pose (between steps, in the physics
        thread): lay the world out again, advertise the new models' topics and descriptions,
        unadvertise those of models that left, republish /tf_static."""
        self._layout()
        self._advertise_models()
        self.readings.forget_gone()
        self._build_lane()
        self.refresh_subscribers()         # the new topics' subscribers; new sensors idle if none

    def _build_lane(self):
        """Where the transport records a Lane (a bag): the messages lane_members says, filled
        and recorded by one compiled call a step, which also gives the step's due mask
        (bag_lane.Lane; /tf's values computed when it stops before /tf, at the steps it is
        due); on_step collects the other devices' readings, and the lane's while a live
        transport beside the bag has subscribers to them (refresh_subscribers)."""
        old, self.lane, self._lane_tf = self.lane, None, None
        self.readings.collect_from(None)
        self._lane_keys, self._lane_devices = frozenset(), frozenset()
        make = getattr(self.transport, "lane", None)
        if old is not None:
            self.transport.drop_lane(old)
        if make is None:
            return
        sim, pubs, moving = self.sim, self.pubs, self.layout.moving
        members, tf_values, lane_devices = lane_members(sim, pubs, self.layout, self.names.frame, self.hil)
        _, readings, stamps, counts = sim.kinematic_samples
        prepare = (TF_BIT, self._lane_tf_values) if moving else None
        self.lane = make(members, (sim.q, sim.v, sim.tau, readings, tf_values), counts, stamps,
                         (self.rate_period, self.rate_k), prepare)
        if self.lane is not None:
            self._lane_keys = frozenset(key for key, h in pubs.items() if any(h is m[0] for m in members))
            self._lane_devices = frozenset(lane_devices)
            self.readings.collect_from([d for d in sim.devices.values() if d.name not in lane_devices])
            if moving:
                self._lane_tf = (tf_values, 7 * np.arange(len(moving)), np.empty(tpl.TF_WORK_SHAPE))

    def _lane_tf_values(self):
        """The lane's /tf values at the current state (before it records /tf)."""
        R, p = self.sim.link_poses()
        tpl.tf_values(R, p, *self.layout.tf_layout[1:], *self._lane_tf)

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
        lane, subscribers, readings = self.lane, self.subscribers, self.readings
        if lane is not None:       # records the clock, joint_states, /tf, kinematic sensors; gives the due mask
            due = lane.record(t)
            if not (due & subscribers.python_due or readings.arrivals.new or t >= readings.quiet_until
                    or subscribers.looking):
                return                          # the lane recorded all there was (most steps)
        else:
            due = tpl.due_rates(self.rate_period, self.rate_k, t)
        work = []
        wanted = subscribers.wanted
        layout = self.layout
        if subscribers.live:
            if due & SUBSCRIBERS_BIT:      # a look at every topic, spread over the next 0.1 s
                subscribers.begin_look(round(self.rate_period[-1] / sim.dt))
            if subscribers.looking:
                changed = subscribers.look()
                if changed:
                    self._update_devices(changed)
        if due & CLOCK_BIT and wanted["clock"]:
            work.append(("clock", t))
        if due & JOINT_STATES_BIT:
            if wanted["joint_states"]:       # with the names of that step (a spawn may change them)
                work.append(("joint_states", "joint_states", t, sim.q[layout.dof_q], sim.v[layout.dof_v],
                             sim.tau[layout.dof_v], layout.dof_names))
            for entity, (iq, iv, names) in layout.namespaced_dofs.items():
                key = f"joint_states/{entity}"
                if wanted.get(key):
                    work.append(("joint_states", key, t, sim.q[iq], sim.v[iv], sim.tau[iv], names))
            if self.actuator_names and wanted.get("actuator_controls/state"):
                work.append(("actuator_controls", t, sim.controls))
        if due & TF_BIT and layout.moving and wanted["tf"]:
            R, p = sim.link_poses()
            work.append(("tf", t, R.copy(), p.copy(), layout.tf_layout))
        readings.collect(sim, t, work, layout.merged, self.hil)
        if due & DIAGNOSTICS_BIT and wanted["diagnostics"]:
            work.append(("diagnostics", t, self.runner_stats))     # evaluated off the physics thread
        if work:
            self.publish_job(lambda: self._write(work))

    def flush(self, sim):
        """Publish the readings that appeared since the last step (frames a render thread
        finished after it), without stepping: the end of a run at rtf 0 loses nothing."""
        work = []
        self.readings.collect(sim, sim.t, work, self.layout.merged, self.hil)
        if work:
            self.publish_job(lambda: self._write(work))

    def _write(self, work):
        self.writer.write(work)

    def _statuses(self, stats):
        config = self.session.config if self.session is not None else self.config    # the run's own target rtf
        return diagnostics.statuses(stats, config, self.sim, self.hil) + self.transport.statuses()
