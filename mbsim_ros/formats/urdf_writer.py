"""URDF out: Model -> URDF text for /robot_description. The reader is urdf_reader.py.

Writing: `to_urdf(model, mesh_dir=None, sensor_frames=True)`. Names are kept: the Model's joint
X is URDF joint X. Types URDF lacks become chains of URDF joints through massless links named
`<joint>_link<k>`; the k-th DOF's joint is `<joint>_<k>`, matching Model.dof_names, so
/joint_states names match the URDF:
    universal     -> revolute about axis, revolute about axis2              (exact)
    euler         -> 3 revolutes about the euler_order axes                 (exact)
    planar        -> prismatic plane_x, prismatic plane_y, revolute normal  (exact)
    translational -> 3 prismatic along x, y, z                              (exact)
    ball          -> 3 revolutes about x, y, z: same motion, but the coordinates are xyz Euler
                     angles, not the Model's quaternion (the ROS side must convert)
    screw         -> revolute X and a prismatic `X_pitch` along the same axis with
                     <mimic joint="X" multiplier="pitch / 2 pi">: exact for robot_state_publisher
                     (which follows mimic joints); a reader that ignores mimic sees 2 DOFs
    free (not the root) -> floating
    custom        -> floating (OpenSim's CustomJoint has no URDF form; an XML comment names its
                     coordinates). Its pose reaches TF from the simulation (ros/bridge.py
                     publishes every moving joint's transform), not from robot_state_publisher
A joint with a child_pose (the joint's child-side frame in the child link, OpenSim's child
offset frame) ends at a massless link `<joint>_child_frame` (joint_frame_links(model) gives the
names) followed by a fixed joint `<joint>_child_pose` with origin inv(child_pose) to the child
link, so T_child = T_parent @ origin @ J(q) @ inv(child_pose) holds in the URDF too. Fixed,
free and custom joints need no such link: their origin becomes origin @ inv(child_pose).
Roots follow Gazebo's convention, which the reader reads back: a single free root joint is not
written, its child is the URDF root link and floats (its pose reaches TF as odom -> root link,
an XML comment says so); every other root joint, a fixed one (a welded base) included, hangs
from an added link "world", the link a URDF welds a robot to. A fixed root joint whose child is
already the Model's "world" link is not written: that link is the URDF root. Infinite limits: continuous for a revolute without position
limits; +-UNLIMITED for a prismatic's positions and for effort/velocity where URDF needs them.
Shapes: box, sphere, cylinder, mesh directly; capsule and cone become a generated OBJ in
mesh_dir when given, else their bounding cylinder (radius r, length L + 2r for a capsule, L for
a cone); a plane is a 20 m x 20 m x 1 mm box under its surface. A mesh is written as its
mesh_path (package://, file:// kept; a file path as file://) with its scale, or, with only
vertices, as an OBJ written to mesh_dir, else skipped with an XML comment. With mesh_dir, mesh
files (not package:// URIs) are written there too, so that the URDF travels with its meshes and
RViz reads them: STL and Collada copied, other formats (OpenSim's .vtp, OBJ) converted to binary
STL. Files in mesh_dir are named `mesh_uri + name` (a package:// prefix, or a path relative to
the URDF), or by file:// URIs when mesh_uri is None; a mesh file that does not exist
(missing_meshes(model)) is then left out with an XML comment, not written as a path to nothing.
With sensor_frames=True each model.sensors[k] and model.frames[k] becomes a massless link of the
same name on a fixed joint `<name>_joint`, so its frame is in TF, and so does each camera's
`<name>_optical_frame` and range sensor's `<name>_laser_frame` (model.sensor_ros_frames).
"""
from __future__ import annotations

import math
import os
import urllib.parse

import numpy as np
from lxml import etree

from ..model import Model, ModelError, sensor_ros_frames
from ..model.transforms import inverse_transform, make_transform, matrix_to_rpy
from .meshes import MeshError, load_mesh, write_stl
from .urdf_reader import UNLIMITED, unique_name

def to_urdf(model: Model, mesh_dir=None, sensor_frames: bool = True, mesh_uri=None) -> str:
    """URDF text for any Model (see the module docstring for how each type is written)."""
    model.finalize()
    writer = _Writer(model, mesh_dir, mesh_uri)
    robot = writer.robot
    roots = [j for j in model.joints if j.parent is None]
    single = roots[0] if len(roots) == 1 else None
    if single is not None and single.type == "free":
        robot.append(etree.Comment(
            f" {_clean(single.child)} floats (joint {_clean(single.name)}): its pose is "
            f"published by TF as odom -> {_clean(single.child)}, not by this URDF "))
    if single is not None and (single.type == "free" or (single.type == "fixed" and single.child == "world")):
        skip = {single.name}
        world = None
    else:
        world = writer.fresh("world")
        if world != "world":          # a readers' world must be the root link named "world"
            robot.append(etree.Comment(f" a link of the model is called world: the roots hang from "
                                       f"{_clean(world)}, which URDF readers do not weld to the world "))
        etree.SubElement(robot, "link", name=world)
        skip = set()
    for link in model.links:
        writer.link(link)
    for joint in model.joints:
        if joint.name not in skip:
            writer.joint(joint, joint.parent if joint.parent is not None else world)
    if sensor_frames:
        for frame in list(model.sensors) + list(model.frames):
            writer.fixed_frame(frame.name, frame.link, frame.pose)
        for sensor in model.sensors:          # camera optical and laser frames, as TF has them
            for name, pose in sensor_ros_frames(sensor):
                writer.fixed_frame(name, sensor.name, pose)
    etree.indent(robot, space="  ")
    return etree.tostring(robot, encoding="unicode", pretty_print=True)


def joint_frame_links(model: Model) -> dict:
    """{joint name: URDF link name} of the massless links to_urdf writes at the child-side frame
    of joints with a child_pose: moving joints whose URDF joint (or chain) cannot carry it
    (every type but fixed, free and custom). Names are `<joint>_child_frame`, made unique
    against the model's link and joint names exactly as to_urdf does."""
    taken = {l.name for l in model.links} | {j.name for j in model.joints}
    out = {}
    for j in model.joints:
        if j.type not in ("fixed", "free", "custom") and not np.array_equal(j.child_pose, np.eye(4)):
            out[j.name] = unique_name(f"{j.name}_child_frame", taken)
            taken.add(out[j.name])
    return out


def _num(x):
    """Shortest text that reads back as the same float."""
    x = float(x)
    return "0" if x == 0 else repr(x)


def _nums(xs):
    return " ".join(_num(x) for x in xs)


def _clean(text):
    """Safe inside an XML comment."""
    return str(text).replace("--", "- -")


RVIZ_MESHES = (".stl", ".dae")      # mesh files RViz reads as they are; others become STL


def mesh_file_missing(shape) -> bool:
    """Whether a mesh shape names a local file that does not exist (a loader's warning said so):
    with a mesh_dir the writer leaves it out rather than point at nothing."""
    if shape.kind != "mesh" or not shape.mesh_path or shape.vertices is not None:
        return False
    path = shape.mesh_path
    if "://" in path:
        if not path.startswith("file://"):
            return False                  # package:// and other URIs: resolved by the reader
        path = urllib.parse.unquote(path[len("file://"):])
    return not os.path.isfile(path)


def missing_meshes(model: Model) -> list:
    """The mesh files of `model` that to_urdf leaves out because they do not exist, each once."""
    return list(dict.fromkeys(shape.mesh_path for link in model.links
                              for shape in list(link.visuals) + list(link.collisions)
                              if mesh_file_missing(shape)))


class _Writer:
    def __init__(self, model, mesh_dir, mesh_uri=None):
        self.model = model
        self.mesh_dir = mesh_dir
        self.mesh_uri = mesh_uri
        self.exported = {}              # source mesh file -> URI of its copy in mesh_dir
        self.robot = etree.Element("robot", name=model.name)
        self.robot.append(etree.Comment(f" generated by mbsim_ros from {_clean(model.source or 'a Model')} "))
        self.names = {l.name for l in model.links} | {j.name for j in model.joints}
        self.joint_frames = joint_frame_links(model)     # reserved first: the bridge computes the same
        self.names |= set(self.joint_frames.values())

    def fresh(self, name):
        name = unique_name(name, self.names)
        self.names.add(name)
        return name

    # -- links ---------------------------------------------------------------------------
    def link(self, link):
        el = etree.SubElement(self.robot, "link", name=link.name)
        if link.mass > 0 or np.any(link.inertia):
            inertial = etree.SubElement(el, "inertial")
            etree.SubElement(inertial, "origin", xyz=_nums(link.com), rpy="0 0 0")
            etree.SubElement(inertial, "mass", value=_num(link.mass))
            I = link.inertia
            etree.SubElement(inertial, "inertia", ixx=_num(I[0, 0]), ixy=_num(I[0, 1]), ixz=_num(I[0, 2]),
                             iyy=_num(I[1, 1]), iyz=_num(I[1, 2]), izz=_num(I[2, 2]))
        for k, shape in enumerate(link.visuals):
            self.shape(el, "visual", shape, f"{link.name}_visual{k}")
        for k, shape in enumerate(link.collisions):
            self.shape(el, "collision", shape, f"{link.name}_collision{k}")

    def shape(self, link_el, tag, shape, label):
        pose, geometry = self.geometry(shape, label)
        if geometry is None and self.mesh_dir is not None and mesh_file_missing(shape):
            link_el.append(etree.Comment(f" {tag} {_clean(shape.name or label)} left out: mesh file "
                                         f"{_clean(shape.mesh_path)} not found "))
            return
        if geometry is None:
            link_el.append(etree.Comment(f" {tag} {_clean(shape.name or label)} skipped: a {shape.kind} "
                                         "without a mesh file or vertices (or no mesh_dir to write them) "))
            return
        el = etree.SubElement(link_el, tag)
        if shape.name:
            el.set("name", shape.name)
        _origin(el, pose)
        el.append(geometry)
        if tag == "visual":
            rgba = np.clip(shape.color, 0, 1)
            material = etree.SubElement(el, "material", name="rgba_" + "_".join(f"{c:.4g}" for c in rgba))
            etree.SubElement(material, "color", rgba=_nums(rgba))

    def geometry(self, shape, label):
        """(pose, <geometry> element or None) for one Shape."""
        g = etree.Element("geometry")
        pose = shape.pose
        if shape.kind == "box":
            etree.SubElement(g, "box", size=_nums(shape.size))
        elif shape.kind == "sphere":
            etree.SubElement(g, "sphere", radius=_num(shape.radius))
        elif shape.kind == "cylinder":
            etree.SubElement(g, "cylinder", radius=_num(shape.radius), length=_num(shape.length))
        elif shape.kind in ("capsule", "cone"):
            if self.mesh_dir is not None:
                v, f = (capsule_mesh if shape.kind == "capsule" else cone_mesh)(shape.radius, shape.length)
                etree.SubElement(g, "mesh", filename=self.write_obj(label, v, f))
            else:
                g.append(etree.Comment(f" {shape.kind} written as its bounding cylinder "))
                length = shape.length + (2 * shape.radius if shape.kind == "capsule" else 0.0)
                etree.SubElement(g, "cylinder", radius=_num(shape.radius), length=_num(length))
        elif shape.kind == "plane":
            g.append(etree.Comment(" plane written as a thin box under its surface "))
            etree.SubElement(g, "box", size="20 20 0.001")
            pose = pose @ make_transform(p=[0, 0, -0.0005])
        elif shape.mesh_path and self.mesh_dir is not None and mesh_file_missing(shape):
            return pose, None
        elif shape.mesh_path and "://" not in shape.mesh_path and self.mesh_dir is not None:
            uri = self.export_mesh(shape.mesh_path)
            if uri is None:
                return pose, None
            etree.SubElement(g, "mesh", filename=uri, scale=_nums(shape.scale))
        elif shape.mesh_path:
            etree.SubElement(g, "mesh", filename=_mesh_uri(shape.mesh_path), scale=_nums(shape.scale))
        elif shape.vertices is not None and self.mesh_dir is not None:
            etree.SubElement(g, "mesh", filename=self.write_obj(label, shape.vertices, shape.faces))
        else:
            return pose, None
        return pose, g

    def write_obj(self, label, vertices, faces):
        os.makedirs(self.mesh_dir, exist_ok=True)
        name = f"{self.model.name}_{label}.obj"
        with open(os.path.join(self.mesh_dir, name), "w", encoding="utf-8") as f:
            f.write(f"# {label} of model {self.model.name}, written by mbsim_ros\n")
            f.writelines(f"v {_nums(v)}\n" for v in vertices)
            f.writelines(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in faces)
        return self.uri_in_mesh_dir(name)

    def export_mesh(self, path):
        """The URI of mesh file `path` copied into mesh_dir: STL and Collada as they are, other
        formats (OpenSim's .vtp, OBJ) converted to binary STL, unscaled (the URDF's scale
        applies). None (an XML comment says why) when the file cannot be read."""
        if path in self.exported:
            return self.exported[path]
        stem, ext = os.path.splitext(os.path.basename(path))
        ext = ext.lower() if ext.lower() in RVIZ_MESHES else ".stl"
        taken = set(self.exported.values())
        name, k = stem + ext, 0
        while self.uri_in_mesh_dir(name) in taken:        # two sources with one file name
            k += 1
            name = f"{stem}_{k}{ext}"
        os.makedirs(self.mesh_dir, exist_ok=True)
        target = os.path.join(self.mesh_dir, name)
        if ext == os.path.splitext(path)[1].lower():
            import shutil
            shutil.copyfile(path, target)
        else:
            try:
                vertices, faces = load_mesh(path)
            except MeshError as exc:
                self.robot.append(etree.Comment(f" mesh {_clean(path)} unreadable, left out: {_clean(str(exc))} "))
                self.exported[path] = None
                return None
            write_stl(target, vertices, faces, header=f"{stem} from {os.path.basename(path)}, by mbsim_ros".encode())
        self.exported[path] = self.uri_in_mesh_dir(name)
        return self.exported[path]

    def uri_in_mesh_dir(self, name):
        """How the URDF names file `name` in mesh_dir: mesh_uri + name, else a file:// URI."""
        if self.mesh_uri is None:
            return _mesh_uri(os.path.abspath(os.path.join(self.mesh_dir, name)))
        prefix = self.mesh_uri.rstrip("/")
        return (prefix + "/" if prefix else "") + urllib.parse.quote(name)

    # -- joints --------------------------------------------------------------------------
    def joint(self, joint, parent):
        """One Model joint as one URDF joint, or as a chain through massless links; a child_pose
        through the joint's child-side frame link."""
        if joint.type in ("fixed", "free", "custom"):
            if joint.type == "custom":
                self.robot.append(etree.Comment(
                    f" custom joint {_clean(joint.name)} (coordinates {_clean(', '.join(joint.dof_names))}): "
                    "no URDF equivalent, written floating; its pose is published by TF "))
            self.urdf_joint(joint.name, _NATIVE.get(joint.type, "floating"), parent, joint.child,
                            joint.origin @ inverse_transform(joint.child_pose), None, None, None)
            return
        frame = self.joint_frames.get(joint.name)
        child = joint.child
        if frame is not None:
            etree.SubElement(self.robot, "link", name=frame)
            child = frame
        if joint.type in ("revolute", "prismatic"):
            self.urdf_joint(joint.name, _NATIVE[joint.type], parent, child, joint.origin, joint.axis, joint, 0)
        elif joint.type == "screw":
            self.screw(joint, parent, child)
        else:
            self.chain(joint, parent, child)
        if frame is not None:
            self.urdf_joint(self.fresh(f"{joint.name}_child_pose"), "fixed", frame, joint.child,
                            inverse_transform(joint.child_pose), None, None, None)

    def chain(self, joint, parent, end):
        """A multi-DOF joint as URDF joints `<joint>_<k>` through links `<joint>_link<k>`."""
        steps = _chain_steps(joint)
        if joint.type == "ball":
            self.robot.append(etree.Comment(
                f" ball joint {_clean(joint.name)}: 3 revolutes about x, y, z (xyz Euler angles "
                "in place of the Model's quaternion; same motion) "))
        origin = joint.origin
        for k, (urdf_type, axis) in enumerate(steps):
            last = k == len(steps) - 1
            child = end if last else self.fresh(f"{joint.name}_link{k}")
            if not last:
                etree.SubElement(self.robot, "link", name=child)
            dof = k if joint.type != "ball" else None
            self.urdf_joint(self.fresh(f"{joint.name}_{k}"), urdf_type, parent, child, origin, axis,
                            joint, dof)
            parent, origin = child, np.eye(4)

    def screw(self, joint, parent, end):
        link = self.fresh(f"{joint.name}_link0")
        etree.SubElement(self.robot, "link", name=link)
        self.urdf_joint(joint.name, "revolute", parent, link, joint.origin, joint.axis, joint, 0)
        el = self.urdf_joint(self.fresh(f"{joint.name}_pitch"), "prismatic", link, end,
                             np.eye(4), joint.axis, None, None)
        etree.SubElement(el, "mimic", joint=joint.name, multiplier=_num(joint.pitch / (2 * math.pi)),
                         offset="0")
        el.addprevious(etree.Comment(f" screw joint {_clean(joint.name)}: translation follows the "
                                     "rotation through <mimic> "))

    def urdf_joint(self, name, urdf_type, parent, child, origin, axis, joint, dof):
        """Write one URDF joint; limits and dynamics from DOF `dof` of `joint` (if any)."""
        lower, upper, effort, velocity, damping, friction = _dof_values(joint, dof)
        if urdf_type == "revolute" and not (np.isfinite(lower) or np.isfinite(upper)):
            urdf_type = "continuous"
        el = etree.SubElement(self.robot, "joint", name=name, type=urdf_type)
        _origin(el, origin)
        etree.SubElement(el, "parent", link=parent)
        etree.SubElement(el, "child", link=child)
        if urdf_type in ("revolute", "continuous", "prismatic"):
            etree.SubElement(el, "axis", xyz=_nums(axis))
            limit = {}
            if urdf_type != "continuous":
                limit["lower"] = _num(max(lower, -UNLIMITED))
                limit["upper"] = _num(min(upper, UNLIMITED))
            if urdf_type != "continuous" or np.isfinite(effort) or np.isfinite(velocity):
                limit["effort"] = _num(min(effort, UNLIMITED))
                limit["velocity"] = _num(min(velocity, UNLIMITED))
            if limit:
                etree.SubElement(el, "limit", **limit)
            if damping or friction:
                etree.SubElement(el, "dynamics", damping=_num(damping), friction=_num(friction))
        return el

    def fixed_frame(self, name, link, pose):
        if name in self.names:
            self.robot.append(etree.Comment(f" frame {_clean(name)} on {_clean(link)} not written: "
                                            "a link or joint already has that name "))
            return
        self.names.add(name)
        etree.SubElement(self.robot, "link", name=name)
        self.urdf_joint(self.fresh(f"{name}_joint"), "fixed", link, name, pose, None, None, None)


_NATIVE = {"fixed": "fixed", "revolute": "revolute", "prismatic": "prismatic", "free": "floating"}


def _chain_steps(joint):
    """[(urdf type, axis in the moving frame)] for a multi-DOF joint written as a chain."""
    e = np.eye(3)
    if joint.type == "universal":
        return [("revolute", joint.axis), ("revolute", joint.axis2)]
    if joint.type == "euler":
        return [("revolute", e["xyz".index(c)]) for c in joint.euler_order]
    if joint.type == "ball":
        return [("revolute", e[k]) for k in range(3)]
    if joint.type == "translational":
        return [("prismatic", e[k]) for k in range(3)]
    if joint.type == "planar":
        x, y = joint.plane_axes()
        return [("prismatic", x), ("prismatic", y), ("revolute", joint.axis)]
    raise ModelError(f"joint {joint.name!r}: cannot write type {joint.type!r} to URDF")


def _dof_values(joint, dof):
    if joint is None or dof is None:
        return -np.inf, np.inf, np.inf, np.inf, 0.0, 0.0
    return (joint.lower[dof], joint.upper[dof], joint.effort_limit[dof], joint.velocity_limit[dof],
            joint.damping[dof], joint.friction[dof])


def _origin(el, T):
    etree.SubElement(el, "origin", xyz=_nums(T[:3, 3]), rpy=_nums(matrix_to_rpy(T[:3, :3])))


def _mesh_uri(path):
    if "://" in path:
        return path
    return "file://" + urllib.parse.quote(os.path.abspath(path))


# -- generated meshes (capsule and cone, only with mesh_dir) -------------------------------
def _revolve(profile, segments=24):
    """Surface of revolution about z of a (r, z) profile from bottom to top pole."""
    angles = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    vertices, rings = [], []
    for r, z in profile:
        start = len(vertices)
        if r == 0:
            vertices.append((0.0, 0.0, z))
            rings.append([start] * segments)
        else:
            vertices += [(r * np.cos(a), r * np.sin(a), z) for a in angles]
            rings.append(list(range(start, start + segments)))
    faces = []
    for lo, hi in zip(rings[:-1], rings[1:]):
        for k in range(segments):
            a, b, c, d = lo[k], lo[(k + 1) % segments], hi[(k + 1) % segments], hi[k]
            faces += [t for t in ((a, b, c), (a, c, d)) if len(set(t)) == 3]
    return np.array(vertices, dtype=float), np.array(faces, dtype=np.int64)


def capsule_mesh(radius, length, segments=24):
    half = length / 2
    cap = np.linspace(-np.pi / 2, np.pi / 2, 9)
    profile = [(radius * np.cos(t), -half + radius * np.sin(t)) for t in cap[:5]]
    profile += [(radius * np.cos(t), half + radius * np.sin(t)) for t in cap[4:]]
    profile = [(0.0 if abs(r) < 1e-15 else r, z) for r, z in profile]
    return _revolve(profile, segments)


def cone_mesh(radius, length, segments=24):
    """Apex at +length/2, base disk at -length/2 (Shape's convention)."""
    return _revolve([(0.0, -length / 2), (radius, -length / 2), (0.0, length / 2)], segments)
