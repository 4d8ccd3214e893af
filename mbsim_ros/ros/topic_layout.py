"""The names and layout of a run's topics and frames (the Bridge's, ros/bridge.py): the namespace,
topic and frame names, the rates' bits, and what a world lays out: the DOFs of joint_states, the
TF tree, the merged Imus, the models' topics and descriptions.

Names (joint_states, frame ids, sensor topics) are world names (model/names.py): a model's own,
"<entity>/<name>" where an earlier model has the name. A model spawned with a namespace
(TopicNames.namespaces) has its sensor topics (<ns>/<its sensor name>), <ns>/robot_description
and <ns>/joint_states (its own joints; they stay in NS/joint_states too) under it; its frames keep
their world names.
TF: frame ids are the links' world names (with the frame prefix); a floating base is odom ->
root link with a static world -> odom; other roots hang from world; fixed joints, sensor
frames, camera optical frames and range laser frames are static. A moving joint with a
child_pose ends at the URDF's `<joint>_child_frame` link (formats.urdf.joint_frame_links), with
a static child_frame -> child link, so TF has every link the URDF has (but the intermediate
links of joints written as chains).
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
from ..run.config import RATES
from ..run.control import joint_dofs
from . import messages as msg
from .qos import DEFAULT, LATCHED, SENSOR


def ros_name(text: str) -> str:
    """A valid ROS name segment from a model or sensor name."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return name if name and not name[0].isdigit() else "_" + name


# their bits in templates.due_rates' mask (RATES' order), and the look at subscribers' (10 Hz)
JOINT_STATES_BIT, TF_BIT, CLOCK_BIT, DIAGNOSTICS_BIT, SUBSCRIBERS_BIT = (1 << k for k in range(len(RATES) + 1))
# the publications every run has, whatever its models
FIXED_KEYS = ("clock", "tf", "tf_static", "diagnostics", "joint_states", "actuator_controls/state")


def check_rate(key, hz):
    """ValueError unless `key` is one of RATES and hz a rate in Hz > 0."""
    if key not in RATES or not (math.isfinite(float(hz)) and float(hz) > 0):
        raise ValueError(f"{key} = {hz}: expected one of {', '.join(RATES)} with a rate in Hz > 0")


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


def robot_description(sim, entity, model, place):
    """The URDF of one of the world's models, with the world names TF and joint_states use."""
    return to_urdf(_welded_where_placed(renamed(model, sim.names, entity), place))


def _derived(entity, world_base, bare_base, name):
    """A frame named after one of an entity's things (`name`, derived from `bare_base`) is
    qualified like that thing's world name `world_base`."""
    return entity + "/" + name if world_base != bare_base else name


class TopicNames:
    """The topic and frame names of a run. ns: the namespace (config.namespace, by default the
    first model's name); namespaces: entity -> "/its/namespace" of the models spawned with one
    (a Session's, shared with it)."""

    def __init__(self, sim, config):
        given = (config.namespace or "").strip("/")     # a valid ROS namespace (config checks it)
        self.ns = "/" + "/".join(ros_name(p) for p in given.split("/")) if given else "/" + ros_name(sim.entities[0])
        self.first = sim.entities[0]
        self.config = config
        self.prefix = config.frame_prefix
        self.namespaces = {}

    def frame(self, name):
        return self.prefix + name

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

    def description_topic(self, entity):
        """The first model's robot_description is NS/robot_description; another's
        NS/<entity>/robot_description (kept for the run, whoever joins or leaves), or
        <its namespace>/robot_description."""
        if entity in self.namespaces:
            return self.namespaces[entity] + "/robot_description"
        return self.topic("robot_description") if entity == self.first else self.topic(entity, "robot_description")


class WorldLayout:
    """DOFs for joint_states, the TF tree (static and moving edges), the merged Imus: what the
    world's models lay out, every name the world name (model/names.py: the first model's bare, a
    later model's "<entity>/<name>" where it clashes). Made anew when the world changes."""

    def __init__(self, sim, config, namespaces, frame):
        names = sim.names
        self.dofs = joint_dofs(sim)          # (DOF name, q index, v index, joint name)
        self.moving = []                     # (parent frame, child frame, parent link or None, child link,
                                             #  the child frame in the child link or None)
        self.static = []                     # (parent frame, child frame, 4x4)
        floating = False
        for k, (entity, model) in enumerate(zip(sim.entities, sim.models)):
            link = names.table(entity, "link")
            place = sim.compiled.placements[k]
            child_frames = joint_frame_links(model)
            for j in model.joints:
                parent = frame(link[j.parent]) if j.parent is not None else ("odom" if j.type == "free" else "world")
                floating = floating or (j.parent is None and j.type == "free")
                child = link[j.child]
                if j.type == "fixed":
                    origin = j.origin if j.parent is not None else place @ j.origin
                    self.static.append((parent, frame(child), origin @ inverse_transform(j.child_pose)))
                elif j.name in child_frames:
                    joint_frame = frame(_derived(entity, child, j.child, child_frames[j.name]))
                    self.moving.append((parent, joint_frame, link.get(j.parent), child, j.child_pose))
                    self.static.append((joint_frame, frame(child), inverse_transform(j.child_pose)))
                else:
                    self.moving.append((parent, frame(child), link.get(j.parent), child, None))
            for sn in model.sensors:
                name = names.world(entity, "sensor", sn.name)
                self.static.append((frame(link[sn.link]), frame(name), sn.pose))
                for fname, pose in sensor_ros_frames(sn):
                    self.static.append((frame(name), frame(name + fname[len(sn.name):]), pose))
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
            if entity in namespaces:
                _, q_off, v_off = sim.compiled.offsets[k]
                q_end = q_off + sim.models[k].nq
                mine = [d for d in self.dofs if q_off <= d[1] < q_end]
                self.namespaced_dofs[entity] = (np.array([d[1] for d in mine], dtype=int),
                                                np.array([d[2] for d in mine], dtype=int), [d[0] for d in mine])
        self.dof_q = np.array([d[1] for d in self.dofs], dtype=int)
        self.dof_v = np.array([d[2] for d in self.dofs], dtype=int)
        # accelerometer + gyro pairs merged into one Imu per link (same pose only)
        self.merged = {}
        if config.merge_imu:
            real = set(config.devices or {})     # keep their own topics (and /sim)
            devs = [d for d in sim.devices.values() if d.name not in real]
            for a in (d for d in devs if d.kind == "accelerometer"):
                g = next((d for d in devs if d.kind == "gyro" and d.link == a.link and d.rate == a.rate
                          and d.delay == a.delay and np.allclose(d.sensor.pose, a.sensor.pose)), None)
                if g is not None:
                    self.merged[a.name] = (a.link + "_imu", a, g)
                    self.merged[g.name] = self.merged[a.name]


def model_topics(sim, names, layout, hil):
    """{key: (topic, type, qos)} of what the world's models publish: descriptions, sensors.
    names: the TopicNames; layout: the WorldLayout; hil: the hardware in the loop or None."""
    out = {f"robot_description/{e}": (names.description_topic(e), msg.STRING, LATCHED) for e in sim.entities}
    for entity in layout.namespaced_dofs:
        out[f"joint_states/{entity}"] = (names.namespaces[entity] + "/joint_states", msg.JOINT_STATE, DEFAULT)
    merged = layout.merged
    for dev in sim.devices.values():
        if not dev.enabled:
            continue

        def topic(*rest, dev=dev):
            return names.model_topic(dev.entity, dev.name, dev.sensor.name, *rest)
        if dev.name in merged:
            key = merged[dev.name][0]
            acc = merged[dev.name][1]
            out[key] = (names.model_topic(dev.entity, key, acc.sensor.link + "_imu"), msg.IMU, SENSOR)
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
        if hil is not None and dev.name in hil.sources:   # the simulated value beside the real one
            out[dev.name + "/sim"] = (topic("sim"), out[dev.name][1], SENSOR)
    return out
