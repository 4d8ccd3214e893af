"""OpenHRP / Choreonoid VRML97 robot files (.wrl) -> Model.

vrml.py turns the text into nodes; this module gives the OpenHRP PROTOs their meaning
(formats-and-solvers.md section 1, sensors-and-ros.md section 1):

- Humanoid: the model; its name is the Humanoid's DEF name. Its own translation/rotation are
  not applied (the root pose is the root Joint's), its joints/segments USE lists are ignored.
- Joint: one Model link and one Model joint, both named by the Joint's DEF name (as Choreonoid
  does). origin = (Transforms between the parent Joint and this one) @ [rotation, translation];
  jointAxis ("X"/"Y"/"Z" or a vector, normalised) is in the child frame. jointType free ->
  'free' (its translation/rotation go into q0, origin stays identity, so the state carries the
  world pose), fixed -> 'fixed', rotate -> 'revolute', slide -> 'prismatic', crawler and
  pseudoContinuousTrack -> 'fixed' with a warning and params["crawler"] = True.
- Joint fields kept: every OpenHRP field by its VRML name goes into `joint.params` (an attribute
  this loader sets on the Model's Joint: jointType, jointId, llimit, ulimit, lvlimit, uvlimit,
  climit, gearRatio, rotorInertia, rotorResistor, torqueConst, encoderPulse, equivalentInertia,
  jointValue, segments, crawler). Mapped: llimit[0]/ulimit[0] -> lower/upper;
  velocity_limit = min(uvlimit[0], -lvlimit[0]) (the symmetric bound both allow);
  effort_limit = climit[0] * torqueConst * gearRatio (motor current limit -> joint torque);
  rotor_inertia/gear_ratio as written (the dynamics adds gearRatio^2 * rotorInertia); a
  non-zero equivalentInertia overrides: rotor_inertia = equivalentInertia / gearRatio^2.
  jointValue (where the PROTO has it) is q0.
- Segment: mass, centerOfMass, momentsOfInertia (row-major 3x3 about the COM); several
  Segments of one Joint (under any Transforms) are merged into the link's inertia. A Joint
  with no Segment (bush-joint samples chain them) gets a massless link, as in OpenHRP and
  Choreonoid (a note). A momentsOfInertia asymmetric by CAD rounding (up to
  model.INERTIA_SYMMETRY_TOL of its largest entry) is averaged with its transpose (a note).
- Shapes (Box, Sphere, Cylinder, Cone, IndexedFaceSet, ElevationGrid, Extrusion) are both
  visuals and collisions (OpenHRP uses one geometry for both); shapes under a sensor (camera
  housings) are visuals only. Meshes are stored in the link frame (pose identity, any
  Transform scale baked in); VRML cylinders and cones run along Y, so their pose turns the
  Shape's z axis onto Y. Color: Material diffuseColor, alpha = 1 - transparency.
- Sensors: AccelerationSensor -> accelerometer, Gyro -> gyro, ForceSensor -> force,
  RangeSensor -> range, VisionSensor -> camera; name = DEF name, pose = mount frame in the
  link frame, params = every other field by its VRML name with PROTO defaults filled in (and
  the standard defaults where a file's PROTO lacks a field). Sorted by type, then sensorId;
  gaps and duplicates in the ids warn.
- ExtraJoint -> LoopConstraint (type as written: xyz, xy, z, piston, ball).
- A file without Humanoid and Joint (an obstacle, a floor as plain shapes) loads as one fixed
  link named after the file, holding its shapes.
"""
from __future__ import annotations

import os

import numpy as np

from ..model import Joint, Link, LoopConstraint, Model, ModelError, Sensor, Shape, symmetric_inertia
from ..model.transforms import make_transform, matrix_to_quat
from . import vrml

JOINT_TYPES = {"free": "free", "fixed": "fixed", "rotate": "revolute", "slide": "prismatic",
               "crawler": "fixed", "pseudoContinuousTrack": "fixed"}
CRAWLER_TYPES = ("crawler", "pseudoContinuousTrack")
EXTRA_JOINT_TYPES = ("xyz", "xy", "z", "piston", "ball")
SENSOR_TYPES = {"AccelerationSensor": "accelerometer", "Gyro": "gyro", "ForceSensor": "force",
                "RangeSensor": "range", "VisionSensor": "camera"}
VISION_TYPES = ("COLOR", "DEPTH", "COLOR_DEPTH", "NONE", "MONO", "MONO_DEPTH")
GROUP_TYPES = ("Group", "Collision", "Anchor", "Billboard")
# Nodes in the expanded scene (a USEd node is walked at each USE, a PROTO body at each instance).
# Real robots and environments have thousands; this bounds the doubling of USE within USE (or
# PROTO within PROTO) that grows a small file exponentially, to about a second of walking.
MAX_SCENE_NODES = 200_000

_NUM = ("SFFloat",)
_VEC = ("SFVec3f",)
_ROT = ("SFRotation",)
_MF = ("MFFloat",)
_NODES = ("MFNode",)
_REQUIRED = object()
# OpenHRP PROTO interfaces: field -> (accepted VRML types, default or _REQUIRED)
JOINT_FIELDS = {
    "children": (_NODES, _REQUIRED), "translation": (_VEC, _REQUIRED), "rotation": (_ROT, _REQUIRED),
    "jointType": (("SFString",), _REQUIRED), "jointId": (("SFInt32",), -1),
    "jointAxis": (("SFVec3f", "SFString"), np.array([0.0, 0.0, 1.0])),
    "llimit": (_MF, np.zeros(0)), "ulimit": (_MF, np.zeros(0)), "lvlimit": (_MF, np.zeros(0)),
    "uvlimit": (_MF, np.zeros(0)), "climit": (_MF, np.zeros(0)),
    "gearRatio": (_NUM, 1.0), "rotorInertia": (_NUM, 0.0), "rotorResistor": (_NUM, 0.0),
    "torqueConst": (_NUM, 1.0), "encoderPulse": (_NUM, 1.0), "equivalentInertia": (_NUM, 0.0),
    "jointValue": (_NUM, 0.0),
}
SEGMENT_FIELDS = {"centerOfMass": (_VEC, np.zeros(3)), "mass": (_NUM, 0.0),
                  "momentsOfInertia": (_MF, np.zeros(9)), "children": (_NODES, [])}
EXTRA_JOINT_FIELDS = {"link1Name": (("SFString",), _REQUIRED), "link2Name": (("SFString",), _REQUIRED),
                      "link1LocalPos": (_VEC, np.zeros(3)), "link2LocalPos": (_VEC, np.zeros(3)),
                      "jointType": (("SFString",), "xyz"), "jointAxis": (_VEC, np.array([1.0, 0.0, 0.0]))}
_MOUNT = {"translation": (_VEC, np.zeros(3)), "rotation": (_ROT, np.array([0.0, 0.0, 1.0, 0.0])),
          "sensorId": (("SFInt32",), -1), "children": (_NODES, [])}
_NO_LIMIT = np.array([-1.0, -1.0, -1.0])
SENSOR_FIELDS = {
    "AccelerationSensor": {"maxAcceleration": (_VEC, _NO_LIMIT)},
    "Gyro": {"maxAngularVelocity": (_VEC, _NO_LIMIT)},
    "ForceSensor": {"maxForce": (_VEC, _NO_LIMIT), "maxTorque": (_VEC, _NO_LIMIT)},
    "RangeSensor": {"scanAngle": (_NUM, 3.14159), "scanStep": (_NUM, 0.1), "scanRate": (_NUM, 10.0),
                    "maxDistance": (_NUM, 10.0)},
    "VisionSensor": {"fieldOfView": (_NUM, 0.785398), "name": (("SFString",), ""),
                     "frontClipDistance": (_NUM, 0.01), "backClipDistance": (_NUM, 10.0),
                     "type": (("SFString",), "NONE"), "width": (("SFInt32",), 320),
                     "height": (("SFInt32",), 240), "frameRate": (_NUM, 30.0)},
}
_MOUNT_KEYS = ("translation", "rotation", "sensorId", "children")
_Y_FROM_Z = np.array([[1.0, 0, 0], [0, 0, 1.0], [0, -1.0, 0]])    # Rx(-90 deg): z -> y


def load_openhrp(path, floating_base: bool = False, **options) -> Model:
    """Load an OpenHRP/Choreonoid .wrl file. `floating_base` is ignored: the file declares
    its root joint (jointType "free" or "fixed"). Raises ModelError naming file and line."""
    path = os.fspath(path)
    scene = vrml.parse_file(path)
    builder = _Builder(scene, path)
    if options:
        builder.model.warnings.append(f"load_openhrp: options {sorted(options)} are not used by this loader")
    return builder.build()


class _LinkData:
    """What a Joint's subtree contributes to its link while walking."""

    def __init__(self, name, node):
        self.name = name
        self.node = node
        self.segments = []        # (mass, com in link frame, inertia about com in link axes, name)
        self.visuals = []
        self.collisions = []


class _Builder:
    def __init__(self, scene, path):
        self.scene = scene
        self.path = path
        self.model = Model()
        self.model.source = path
        self.model.warnings.extend(scene.notes)
        self.links = []             # _LinkData in walk order
        self.sensors = []           # (type order, sensor_id, walk order, Sensor)
        self.extra_joints = []
        self.noted = set()
        self.walked = 0             # nodes the walk visited, copies from USE and PROTO instances included

    def warn(self, text):
        self.model.warnings.append(text)

    def note_once(self, key, text):
        if key not in self.noted:
            self.noted.add(key)
            self.warn(text)

    # -- top level
    def build(self) -> Model:
        roots = self.scene.roots
        humanoids = [n for n in roots if n.type == "Humanoid"]
        self.extra_joints = [n for n in roots if n.type == "ExtraJoint"]
        if humanoids:
            humanoid = humanoids[0]
            if len(humanoids) > 1:
                self.warn(f"{humanoids[1].where}: a second Humanoid; only the first ({humanoid.name or humanoid.type}) is loaded")
            self.model.name = humanoid.name or humanoid.get("name") or _stem(self.path)
            body = humanoid.get("humanoidBody", [])
            if not any(n.type == "Joint" for n in body):
                raise ModelError(f"{humanoid.where}: Humanoid {self.model.name}: expected a Joint in humanoidBody")
            self.walk(body, None, np.eye(4))
        elif any(n.type == "Joint" for n in roots):
            self.model.name = _stem(self.path)
            self.walk([n for n in roots if n.type == "Joint"], None, np.eye(4))
        else:
            self.build_environment(roots)
        self.add_links()
        self.add_sensors()
        self.add_extra_joints()
        return self.model.finalize()

    def build_environment(self, roots):
        """A file of plain shapes (an obstacle, a floor): one fixed link holding them."""
        name = _stem(self.path)
        self.model.name = name
        link = _LinkData(name, None)
        self.links.append(link)
        link.joint = Joint(name, "fixed", None, name)
        link.joint.params = {"jointType": "fixed", "environment": True}
        self.walk(roots, link, np.eye(4), need_link=False)
        self.warn(f"{self.path}: no Humanoid or Joint: loaded as one fixed environment link {name!r} "
                  f"with {len(link.visuals)} shapes and no mass")

    # -- the scene walk (an explicit stack: no recursion)
    def walk(self, nodes, link, T, visual_only=False, need_link=True):
        stack = [(n, link, T, visual_only) for n in reversed(nodes) if n is not None]
        while stack:
            node, link, T, visual_only = stack.pop()
            self.walked += 1
            if self.walked > MAX_SCENE_NODES:      # a node USEd twice at each of 40 levels is 2^40 nodes
                raise ModelError(f"{node.where}: the scene expands to more than {MAX_SCENE_NODES} nodes (each USE "
                                 "and PROTO instance counts as a copy); expected a model of fewer nodes, without "
                                 "USE or PROTO instances repeated within repeated ones")
            children, child_link, child_T = self.visit(node, link, T, visual_only)
            if node.type in SENSOR_TYPES:
                visual_only = True
            stack.extend((c, child_link, child_T, visual_only) for c in reversed(children) if c is not None)

    def visit(self, node, link, T, visual_only):
        """Handle one node; return (children to walk, their link, their transform)."""
        kind = node.type
        if kind == "Joint":
            new = self.add_joint(node, link, T)
            return new.children, new, np.eye(4)
        if kind == "Humanoid":
            raise ModelError(f"{node.where}: a Humanoid inside another; expected Joint, Segment, sensor or shape nodes")
        if kind == "ExtraJoint":
            self.extra_joints.append(node)
            return [], link, T
        if link is None:
            if kind in ("Segment", "Shape") or kind in SENSOR_TYPES:
                raise ModelError(f"{node.where}: {kind} outside any Joint; expected it in a Joint's children")
        if kind == "Segment":
            fields = _proto_fields(node, SEGMENT_FIELDS)
            link.segments.append(_segment_inertia(node, fields, T, self.warn))
            return fields["children"], link, T
        if kind in SENSOR_TYPES:
            mount = self.add_sensor(node, link, T)
            return node.get("children", []), link, T @ mount
        if kind == "Transform":
            M = vrml.transform_matrix(node)
            return node.get("children", []), link, (T if M is None else T @ M)
        if kind in GROUP_TYPES:
            return node.get("children", []), link, T
        if kind == "Switch":
            choice, which = node.get("choice", []), node.get("whichChoice", -1)
            return ([choice[which]] if 0 <= which < len(choice) else []), link, T
        if kind == "LOD":
            return node.get("level", [])[:1], link, T        # the most detailed level
        if kind == "Inline":
            return node.inlined or [], link, T
        if kind == "Shape":
            shape = self.make_shape(node, T)
            if shape is not None:
                link.visuals.append(shape)
                if not visual_only:
                    link.collisions.append(shape)
            return [], link, T
        if node.proto is not None:
            if kind in ("PressureSensor", "PhotoInterrupter", "TorqueSensor"):
                self.warn(f"{node.where}: {kind} {node.name!r} is not a supported sensor type; skipped")
                return [], link, T
            return vrml.instantiate(node), link, T   # an unknown PROTO shows its body
        return [], link, T                           # lights, viewpoints, sensors of the browser

    # -- joints and links
    def add_joint(self, node, parent, T):
        f = _proto_fields(node, JOINT_FIELDS)
        where = node.where
        name = node.name or node.get("name") or ""
        if not name:
            raise ModelError(f"{where}: Joint without a name; expected DEF <name> Joint {{...}}")
        raw_type = f["jointType"]
        if raw_type not in JOINT_TYPES:
            raise ModelError(f"{where}: Joint {name}: jointType {raw_type!r}; expected one of "
                             f"{', '.join(JOINT_TYPES)}")
        jtype = JOINT_TYPES[raw_type]
        R = vrml.rotation_matrix(f["rotation"], f"{where}: Joint {name} rotation")
        offset = make_transform(R, f["translation"])
        params = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                  for k, v in f.items() if k not in ("children", "translation", "rotation")}
        params["crawler"] = raw_type in CRAWLER_TYPES
        if params["crawler"]:
            self.warn(f"{where}: joint {name}: jointType {raw_type!r} (a crawler track) is loaded as "
                      "fixed; the track's surface motion is not simulated (joint.params['crawler'])")
        kwargs = {}
        if jtype == "free":
            kwargs["q0"] = np.concatenate([offset[:3, 3], matrix_to_quat(R)])
            origin = T
        else:
            origin = T @ offset
        if jtype in ("revolute", "prismatic"):
            kwargs.update(_joint_dynamics(f, name, where))
            kwargs["axis"] = _joint_axis(f["jointAxis"], name, where)
        link = _LinkData(name, node)
        link.children = f["children"]
        link.joint = Joint(name, jtype, parent.name if parent else None, name, origin=origin, **kwargs)
        link.joint.params = params
        self.links.append(link)
        return link

    def add_links(self):
        bare = [data.name for data in self.links if data.node is not None and not data.segments]
        if bare:    # bush-joint samples chain such joints: OpenHRP and Choreonoid give each a massless link
            self.warn(f"{self.path}: Joint{'s' if len(bare) > 1 else ''} {', '.join(bare)} "
                      f"{'have' if len(bare) > 1 else 'has'} no Segment: massless link{'s' if len(bare) > 1 else ''}, "
                      "as OpenHRP and Choreonoid load them")
        for data in self.links:
            mass, com, inertia = _merge_segments(data.segments)
            data.joint.params["segments"] = [s[3] for s in data.segments]
            self.model.add_link(Link(data.name, mass, com, inertia, visuals=data.visuals,
                                     collisions=data.collisions))
            self.model.add_joint(data.joint)

    # -- sensors
    def add_sensor(self, node, link, T):
        """Record the sensor; return its mount frame in the enclosing frame (for its children)."""
        kind = node.type
        spec = {**_MOUNT, **SENSOR_FIELDS[kind]}
        f = _proto_fields(node, spec)
        where = node.where
        pose_in_parent = make_transform(vrml.rotation_matrix(f["rotation"], f"{where}: {kind} rotation"),
                                        f["translation"])
        params = {k: (float(v) if isinstance(v, float) else v) for k, v in f.items() if k not in _MOUNT_KEYS}
        for k, v in node.fields.items():         # fields a file's PROTO adds beyond the standard ones
            if k not in params and k not in _MOUNT_KEYS and not isinstance(v, (vrml.Node, vrml.IsRef, list)):
                params[k] = v
        if kind == "VisionSensor" and params["type"] not in VISION_TYPES:
            self.warn(f"{where}: VisionSensor {node.name!r}: type {params['type']!r}; expected one of "
                      f"{', '.join(VISION_TYPES)}")
        name = node.name or f"{SENSOR_TYPES[kind]}_{link.name}_{f['sensorId']}"
        if not node.name:
            self.warn(f"{where}: {kind} without a DEF name; named {name!r}")
        sensor = Sensor(name, SENSOR_TYPES[kind], link.name, pose=T @ pose_in_parent,
                        sensor_id=int(f["sensorId"]), params=params)
        order = list(SENSOR_TYPES.values()).index(sensor.type)
        self.sensors.append((order, sensor.sensor_id, len(self.sensors), sensor))
        return pose_in_parent

    def add_sensors(self):
        by_type = {}
        for entry in sorted(self.sensors, key=lambda e: (e[0], e[1] < 0, e[1], e[2])):
            sensor = entry[3]
            self.model.sensors.append(sensor)
            by_type.setdefault(sensor.type, []).append(sensor.sensor_id)
        for stype, ids in by_type.items():
            dup = sorted({i for i in ids if ids.count(i) > 1})
            if dup:
                self.warn(f"{self.path}: {stype} sensors share sensorId {dup}")
            if sorted(set(ids)) != list(range(len(set(ids)))):
                self.warn(f"{self.path}: {stype} sensorIds {sorted(ids)} are not 0..{len(set(ids)) - 1} "
                          "(a gap or a missing id)")

    # -- loops
    def add_extra_joints(self):
        links = {d.name for d in self.links}
        for node in self.extra_joints:
            f = _proto_fields(node, EXTRA_JOINT_FIELDS)
            where = node.where
            for key in ("link1Name", "link2Name"):
                if f[key] not in links:
                    raise ModelError(f"{where}: ExtraJoint {node.name}: {key} {f[key]!r}; expected the "
                                     f"DEF name of a Joint (one of {', '.join(sorted(links))})")
            if f["jointType"] not in EXTRA_JOINT_TYPES:
                raise ModelError(f"{where}: ExtraJoint {node.name}: jointType {f['jointType']!r}; expected "
                                 f"one of {', '.join(EXTRA_JOINT_TYPES)}")
            axis = np.asarray(f["jointAxis"], dtype=float)
            if np.linalg.norm(axis) < 1e-12:
                raise ModelError(f"{where}: ExtraJoint {node.name}: jointAxis is zero; expected a direction")
            name = node.name or f"{f['link1Name']}_{f['link2Name']}"
            self.model.constraints.append(LoopConstraint(
                name, f["jointType"], f["link1Name"], f["link2Name"], pos1=np.array(f["link1LocalPos"], float),
                pos2=np.array(f["link2LocalPos"], float), axis=axis / np.linalg.norm(axis),
                params={k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in f.items()}))

    # -- shapes
    def make_shape(self, node, T):
        geometry = node.get("geometry")
        if geometry is None:
            return None
        if geometry.proto is not None:            # a PROTO standing for a geometry node
            body = vrml.instantiate(geometry)
            geometry = body[0] if body else None
            if geometry is None:
                return None
        color = _color(node.get("appearance"))
        name = node.name or geometry.name
        kind = geometry.type
        R, scale = _rotation_and_scale(T)
        if kind == "Box":
            return Shape("box", pose=make_transform(R, T[:3, 3]), size=np.asarray(geometry.get("size", (2, 2, 2))) * scale,
                         color=color, name=name)
        if kind == "Sphere":
            if not np.allclose(scale, scale[0]):
                self.warn(f"{geometry.where}: Sphere under a non-uniform scale; using the mean scale")
            return Shape("sphere", pose=make_transform(R, T[:3, 3]), radius=geometry.get("radius", 1.0) * scale.mean(),
                         color=color, name=name)
        if kind in ("Cylinder", "Cone"):
            radius = geometry.get("radius", 1.0) if kind == "Cylinder" else geometry.get("bottomRadius", 1.0)
            return Shape(kind.lower(), pose=make_transform(R @ _Y_FROM_Z, T[:3, 3]),
                         radius=radius * 0.5 * (scale[0] + scale[2]), length=geometry.get("height", 2.0) * scale[1],
                         color=color, name=name)
        if kind in ("IndexedFaceSet", "ElevationGrid", "Extrusion"):
            vertices, faces = _MESHERS[kind](geometry)
            if len(faces) == 0:
                return None
            vertices = vertices @ T[:3, :3].T + T[:3, 3]
            return Shape("mesh", vertices=vertices, faces=faces, color=color, name=name)
        self.note_once(kind, f"{geometry.where}: {kind} geometry has no surface or is not supported; skipped")
        return None


# -- helpers: fields -------------------------------------------------------------------------
def _proto_fields(node, spec):
    """The node's values for the fields in `spec`, checking the PROTO interface's types and
    filling in defaults for optional fields the PROTO does not declare."""
    proto = node.proto
    declared = proto.field_types if proto is not None else {}
    out = {}
    for name, (types, default) in spec.items():
        if name in declared:
            if declared[name] not in types:
                raise ModelError(f"{proto.file}:{proto.line}: PROTO {proto.name} field {name!r} is "
                                 f"{declared[name]}; expected {' or '.join(types)}")
            value = node.get(name)
            out[name] = default if value is None and default is not _REQUIRED else value
        elif default is _REQUIRED:
            raise ModelError(f"{node.where}: {node.type}: its PROTO has no field {name!r}; expected "
                             f"{' or '.join(types)} {name}")
        else:
            out[name] = default
    return out


def _joint_axis(value, name, where):
    if isinstance(value, str):
        axes = {"X": (1.0, 0, 0), "Y": (0, 1.0, 0), "Z": (0, 0, 1.0)}
        if value.upper() not in axes:
            raise ModelError(f"{where}: Joint {name}: jointAxis {value!r}; expected \"X\", \"Y\", \"Z\" or a vector")
        return np.array(axes[value.upper()])
    axis = np.asarray(value, dtype=float)
    n = np.linalg.norm(axis)
    if not np.isfinite(n) or n < 1e-12:
        raise ModelError(f"{where}: Joint {name}: jointAxis {axis.tolist()}; expected a non-zero direction")
    return axis / n


def _first(values):
    values = np.asarray(values, dtype=float).reshape(-1)
    return float(values[0]) if values.size else None


def _joint_dynamics(f, name, where):
    """Limits, rotor and initial value of a rotate/slide joint (see the module docstring)."""
    out = {}
    lower, upper = _first(f["llimit"]), _first(f["ulimit"])
    if lower is not None:
        out["lower"] = lower
    if upper is not None:
        out["upper"] = upper
    if lower is not None and upper is not None and lower > upper:
        raise ModelError(f"{where}: Joint {name}: llimit {lower} > ulimit {upper}; expected llimit <= ulimit")
    vmin, vmax = _first(f["lvlimit"]), _first(f["uvlimit"])
    bounds = [abs(v) for v in (vmin, vmax) if v is not None]
    if bounds:
        out["velocity_limit"] = min(bounds)
    gear = float(f["gearRatio"])
    current = _first(f["climit"])
    if current is not None:
        out["effort_limit"] = abs(current * f["torqueConst"] * gear)
    out["gear_ratio"] = gear
    out["rotor_inertia"] = float(f["rotorInertia"])
    if f["equivalentInertia"] and gear:
        out["rotor_inertia"] = float(f["equivalentInertia"]) / gear ** 2
    out["q0"] = [float(f["jointValue"])]
    return out


# -- helpers: mass properties ------------------------------------------------------------------
def _rotation_and_scale(T):
    """Split the 3x3 part of an affine transform into a rotation and per-axis scale factors."""
    M = T[:3, :3]
    scale = np.linalg.norm(M, axis=0)
    if np.allclose(scale, 1.0, atol=1e-9):
        return M, np.ones(3)
    return M / np.where(scale > 0, scale, 1.0), scale


def _segment_inertia(node, f, T, warn):
    """One Segment's (mass, com, inertia about com) in the link frame, and its name."""
    where = node.where
    mass = float(f["mass"])
    if not np.isfinite(mass) or mass < 0:
        raise ModelError(f"{where}: Segment {node.name}: mass {mass}; expected a number >= 0")
    moments = np.asarray(f["momentsOfInertia"], dtype=float).reshape(-1)
    if moments.size != 9:
        raise ModelError(f"{where}: Segment {node.name}: momentsOfInertia has {moments.size} numbers; "
                         "expected 9 (a row-major 3x3 matrix)")
    inertia, note = symmetric_inertia(moments, f"{where}: Segment {node.name} momentsOfInertia")
    if note:
        warn(note)
    R, _ = _rotation_and_scale(T)
    com = R @ np.asarray(f["centerOfMass"], dtype=float) + T[:3, 3]
    return mass, com, R @ inertia @ R.T, node.name


def _merge_segments(segments):
    """m = sum m_i; c = sum m_i c_i / m; I = sum R_i I_i R_i^T + m_i (|o|^2 E - o o^T), o = c_i - c."""
    if not segments:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    masses = np.array([s[0] for s in segments])
    coms = np.array([s[1] for s in segments])
    mass = masses.sum()
    com = masses @ coms / mass if mass > 0 else coms.mean(axis=0)
    inertia = np.zeros((3, 3))
    for m, c, I, _ in segments:
        o = c - com
        inertia += I + m * (o @ o * np.eye(3) - np.outer(o, o))
    return float(mass), com, 0.5 * (inertia + inertia.T)


# -- helpers: geometry -------------------------------------------------------------------------
def _color(appearance):
    """RGBA from the Material; without a Material keep the Shape's default grey."""
    material = appearance.get("material") if appearance is not None else None
    if material is None:
        return np.array([0.7, 0.7, 0.7, 1.0])
    rgb = np.asarray(material.get("diffuseColor", (0.8, 0.8, 0.8)), dtype=float)
    return np.append(rgb, 1.0 - float(material.get("transparency", 0.0)))


def _polygons_to_triangles(index, n_points, ccw, where, field="coordIndex"):
    """Split an index list at -1 and fan-triangulate each polygon (VRML polygons are convex
    by default); clockwise faces (ccw FALSE) are flipped so every face is counter-clockwise."""
    index = np.asarray(index, dtype=int).reshape(-1)
    if index.size and (index.max() >= n_points or index.min() < -1):
        bad = int(index.max() if index.max() >= n_points else index.min())
        raise ModelError(f"{where}: {field} refers to point {bad}, but there are {n_points} points; "
                         f"expected indices 0..{n_points - 1} and -1 between polygons")
    triangles = []
    ends = np.flatnonzero(index == -1).tolist() + [index.size]
    start = 0
    for end in ends:
        poly = index[start:end]
        start = end + 1
        for k in range(1, len(poly) - 1):
            triangles.append((poly[0], poly[k], poly[k + 1]) if ccw else (poly[0], poly[k + 1], poly[k]))
    return np.array(triangles, dtype=int).reshape(-1, 3)


def _indexed_face_set(node):
    coord = node.get("coord")
    points = np.asarray(coord.get("point", np.zeros((0, 3))) if coord is not None else np.zeros((0, 3)),
                        dtype=float).reshape(-1, 3)
    faces = _polygons_to_triangles(node.get("coordIndex", []), len(points), node.get("ccw", True), node.where)
    return points, faces


def _elevation_grid(node):
    nx, nz = int(node.get("xDimension", 0)), int(node.get("zDimension", 0))
    heights = np.asarray(node.get("height", []), dtype=float).reshape(-1)
    if heights.size != nx * nz:
        raise ModelError(f"{node.where}: ElevationGrid height has {heights.size} values; expected "
                         f"xDimension * zDimension = {nx * nz}")
    dx, dz = float(node.get("xSpacing", 1.0)), float(node.get("zSpacing", 1.0))
    i, j = np.meshgrid(np.arange(nx), np.arange(nz))          # vertex (i, j) at index j * nx + i
    vertices = np.column_stack([i.ravel() * dx, heights, j.ravel() * dz])
    faces = []
    for jj in range(nz - 1):
        for ii in range(nx - 1):
            a, b, c, d = jj * nx + ii, (jj + 1) * nx + ii, (jj + 1) * nx + ii + 1, jj * nx + ii + 1
            faces += [(a, b, c), (a, c, d)]                   # counter-clockwise seen from +y
    faces = np.array(faces, dtype=int).reshape(-1, 3)
    return vertices, (faces if node.get("ccw", True) else faces[:, ::-1])


def _extrusion(node):
    """VRML97 Extrusion: the crossSection (in each spine point's XZ plane) swept along the
    spine, scaled and oriented per spine point; caps close the ends."""
    spine = np.asarray(node.get("spine", [[0, 0, 0], [0, 1, 0]]), dtype=float).reshape(-1, 3)
    cross = np.asarray(node.get("crossSection", [[1, 1], [1, -1], [-1, -1], [-1, 1], [1, 1]]),
                       dtype=float).reshape(-1, 2)
    n, m = len(spine), len(cross)
    if n < 2 or m < 2:
        return np.zeros((0, 3)), np.zeros((0, 3), dtype=int)
    scales = np.asarray(node.get("scale", [[1, 1]]), dtype=float).reshape(-1, 2)
    orients = np.asarray(node.get("orientation", [[0, 0, 1, 0]]), dtype=float).reshape(-1, 4)
    frames = _spine_frames(spine)
    vertices = []
    for k in range(n):
        sx, sz = scales[min(k, len(scales) - 1)]
        O = vrml.rotation_matrix(orients[min(k, len(orients) - 1)], node.where + ": Extrusion orientation")
        local = np.column_stack([cross[:, 0] * sx, np.zeros(m), cross[:, 1] * sz]) @ O.T
        vertices.append(spine[k] + local @ frames[k].T)
    vertices = np.vstack(vertices)
    faces = []
    for k in range(n - 1):
        for c in range(m - 1):
            a, b, c2, d = k * m + c, k * m + c + 1, (k + 1) * m + c + 1, (k + 1) * m + c
            faces += [(a, d, c2), (a, c2, b)]
    closed = np.allclose(cross[0], cross[-1])
    ring = list(range(m - 1 if closed else m))
    # caps run each ring opposite to the side faces that share its edges: a closed, consistent mesh
    if node.get("beginCap", True) and len(ring) >= 3:
        faces += [(ring[0], ring[i], ring[i + 1]) for i in range(1, len(ring) - 1)]
    if node.get("endCap", True) and len(ring) >= 3:
        last = (n - 1) * m
        faces += [(last + ring[0], last + ring[i + 1], last + ring[i]) for i in range(1, len(ring) - 1)]
    faces = np.array(faces, dtype=int).reshape(-1, 3)
    return vertices, (faces if node.get("ccw", True) else faces[:, ::-1])


def _spine_frames(spine):
    """Per spine point, the 3x3 [X Y Z] of the VRML97 spine-aligned cross-section plane."""
    n = len(spine)
    closed = np.allclose(spine[0], spine[-1]) and n > 2
    Y, Z = np.zeros((n, 3)), np.zeros((n, 3))
    for k in range(n):
        prev = spine[k - 1] if k > 0 else (spine[-2] if closed else spine[0])
        nxt = spine[k + 1] if k < n - 1 else (spine[1] if closed else spine[-1])
        Y[k] = nxt - prev
        if 0 < k < n - 1 or closed:
            Z[k] = np.cross(nxt - spine[k], prev - spine[k])
    for k in range(n):
        Y[k] = Y[k] / np.linalg.norm(Y[k]) if np.linalg.norm(Y[k]) > 1e-12 else (Y[k - 1] if k else [0, 1, 0])
    have_z = [k for k in range(n) if np.linalg.norm(Z[k]) > 1e-12]
    if not have_z:                                 # a straight spine: turn (0, 1, 0) onto Y
        R = _rotation_between(np.array([0.0, 1.0, 0.0]), Y[0])
        Z[:] = R @ np.array([0.0, 0.0, 1.0])
    else:
        for k in range(n):
            if np.linalg.norm(Z[k]) <= 1e-12:
                Z[k] = Z[have_z[0]] if k < have_z[0] else Z[k - 1]
            Z[k] /= np.linalg.norm(Z[k])
            if k and Z[k] @ Z[k - 1] < 0:
                Z[k] = -Z[k]
    X = np.cross(Y, Z)
    return np.stack([X, Y, Z], axis=2)


def _rotation_between(a, b):
    v, c = np.cross(a, b), float(a @ b)
    if np.linalg.norm(v) < 1e-12:
        return np.eye(3) if c > 0 else np.diag([1.0, -1.0, -1.0])
    K = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
    return np.eye(3) + K + K @ K / (1 + c)


_MESHERS = {"IndexedFaceSet": _indexed_face_set, "ElevationGrid": _elevation_grid, "Extrusion": _extrusion}


def _stem(path):
    return os.path.splitext(os.path.basename(path))[0]
