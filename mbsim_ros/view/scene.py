"""A world's scene in the browser: viser nodes built once from Models, moved each frame.

    links = model_links(models, names)                  # [(world link name, Link)], pose-array order
    world = WorldScene(server.scene, links, sensors)    # geometry, frames, centres of mass, sensors
    world.set_link_poses(R, p)                           # (nl, 3, 3), (nl, 3): each frame
    world.set_contacts(points, forces)                   # world frame, N
    world.set_readings({sensor: Reading})                # F/T arrows, range points

Every link is one frame node; its visual and collision shapes, its REP 103 axes and its centre
of mass are children fixed in it, so a frame moves a link with one position and one orientation
message, and only links that moved are sent. Primitives are drawn as the project's renderer
tessellates them (render.tessellate), so the browser shows the silhouette `mbsim render` does.
Nothing here knows a running Session: a recorded bag's replay draws through this too.
"""
from __future__ import annotations

import numpy as np

from ..model.model import OPTICAL_FRAME
from ..model.transforms import matrix_to_quat
from ..render.scene import camera_parameters, range_directions, tessellate

SEGMENTS = 32                       # around a cylinder or sphere (render's 24 looks faceted up close)
PLANE_SIDE = 20.0                   # m, an infinite plane drawn as a square this wide
COLLISION_COLOR = (255, 140, 0)     # collision shapes: orange, half transparent, over the visuals
COM_COLOR = (255, 0, 255)
CONTACT_COLOR = (255, 40, 40)
WRENCH_COLOR = (40, 200, 255)
RANGE_COLOR = (255, 230, 0)
POSE_TOLERANCE = 1e-5               # m and rotation matrix entries: a link that moved less is not re-sent
FORCE_SCALE = 0.002                 # m per N of contact or sensor force arrows (500 N: 1 m)


def model_links(models, names=None):
    """[(world link name, Link)] of `models` in the order of compiled link poses (models in
    order, each model's links in joint order). names(entity index, bare name) -> world name
    (a Simulation's names); default: the bare names."""
    out = []
    for i, model in enumerate(models):
        if not model._finalized:
            model.finalize()
        for joint in model.joints:
            link = model.link(joint.child)
            out.append((names(i, link.name) if names else link.name, link))
    return out


def rgb255(color):
    c = np.clip(np.asarray(color, float).reshape(-1), 0.0, 1.0)
    return tuple(int(round(255 * x)) for x in c[:3])


def wxyz(R):
    """viser's (w, x, y, z) of a rotation matrix."""
    x, y, z, w = matrix_to_quat(R)
    return (float(w), float(x), float(y), float(z))


def wxyz_array(R):
    """(n, 4) quaternions (w, x, y, z) of rotation matrices (n, 3, 3), w >= 0 (to display
    precision: the magnitudes from the diagonal, the signs from the off-diagonal terms)."""
    d0, d1, d2 = R[:, 0, 0], R[:, 1, 1], R[:, 2, 2]
    q = 0.5 * np.sqrt(np.maximum(0.0, np.stack([1 + d0 + d1 + d2, 1 + d0 - d1 - d2,
                                                1 - d0 + d1 - d2, 1 - d0 - d1 + d2], axis=1)))
    q[:, 1] = np.copysign(q[:, 1], R[:, 2, 1] - R[:, 1, 2])
    q[:, 2] = np.copysign(q[:, 2], R[:, 0, 2] - R[:, 2, 0])
    q[:, 3] = np.copysign(q[:, 3], R[:, 1, 0] - R[:, 0, 1])
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def shape_mesh(shape):
    """(vertices (n, 3), faces (m, 3)) of a shape in its own frame, or None when there is
    nothing to draw (a mesh file that could not be read, a zero-size primitive)."""
    if shape.kind == "mesh":
        if shape.vertices is None or shape.faces is None or len(shape.faces) == 0:
            return None
        return np.asarray(shape.vertices, float).reshape(-1, 3), np.asarray(shape.faces, np.int64).reshape(-1, 3)
    if shape.kind == "plane":
        h = 0.5 * PLANE_SIDE
        V = np.array([[-h, -h, 0.0], [h, -h, 0.0], [h, h, 0.0], [-h, h, 0.0]])
        return V, np.array([[0, 1, 2], [0, 2, 3]])
    if shape.kind == "box":
        size = 0.5 * np.asarray(shape.size, float)
    elif shape.kind in ("cylinder", "capsule", "cone"):
        size = np.array([shape.radius, 0.5 * shape.length, 0.0])
    else:
        size = np.array([shape.radius, 0.0, 0.0])
    if not np.all(np.isfinite(size)) or size[0] <= 0 or (shape.kind == "box" and np.any(size <= 0)):
        return None
    return tessellate(shape.kind, size, SEGMENTS)


class WorldScene:
    """The scene nodes of one world under `root`, from `links` ([(name, Link)] in the order of
    the pose arrays) and `sensors` ([(world sensor name, Sensor, link index)])."""

    def __init__(self, scene, links, sensors=(), root="/world"):
        self.scene = scene
        self.root = root
        self.link_names = [name for name, _ in links]
        self._frames, self._visuals, self._collisions, self._axes, self._coms = [], [], [], [], []
        self.node_link = {}             # scene node name -> link name (clicks)
        self.missing_meshes = 0         # mesh shapes with no geometry (file not read)
        self.size = self._world_size(links)
        axes_length = max(0.02, 0.08 * self.size)
        for k, (name, link) in enumerate(links):
            base = f"{root}/links/{k}"
            frame = scene.add_frame(base, show_axes=False)
            self._frames.append(frame)
            drawn = link.visuals or link.collisions   # a link with no visuals shows its collisions
            for i, shape in enumerate(drawn):
                node = self._add_shape(f"{base}/visual/{i}", shape, rgb255(shape.color),
                                       opacity=float(shape.color[3]) if len(shape.color) > 3 and shape.color[3] < 1 else None)
                if node is not None:
                    self._visuals.append(node)
                    self.node_link[node.name] = name
            for i, shape in enumerate(link.collisions):
                node = self._add_shape(f"{base}/collision/{i}", shape, COLLISION_COLOR, opacity=0.5, visible=False)
                if node is not None:
                    self._collisions.append(node)
                    self.node_link[node.name] = name
            self._axes.append(scene.add_frame(f"{base}/axes", axes_length=axes_length,
                                              axes_radius=0.06 * axes_length, visible=False))
            if link.mass > 0:
                self._coms.append(scene.add_icosphere(f"{base}/com", radius=0.01 + 0.012 * self.size,
                                                      color=COM_COLOR, position=tuple(link.com), visible=False))
        self._sent = np.full((len(links), 12), np.inf)      # (position, rotation matrix) last sent
        self.link_R = np.tile(np.eye(3), (len(links), 1, 1))
        self.link_p = np.zeros((len(links), 3))
        self._contacts = None
        self._contact_arrows = None
        self._sensors = []
        self._add_sensors(sensors)

    # -- building ---------------------------------------------------------------------------
    @staticmethod
    def _world_size(links):
        """A length for axes and markers: the diagonal of the box around the links' shapes."""
        pts = []
        for _, link in links:
            for shape in link.visuals or link.collisions:
                if shape.kind != "plane":
                    pts.append(np.asarray(shape.pose, float)[:3, 3])
        if len(pts) < 2:
            return 1.0
        pts = np.array(pts)
        return float(np.clip(np.linalg.norm(pts.max(0) - pts.min(0)), 0.2, 5.0))

    def _add_shape(self, name, shape, color, opacity=None, visible=True):
        mesh = shape_mesh(shape)
        if mesh is None:
            if shape.kind == "mesh":
                self.missing_meshes += 1
            return None
        V, F = mesh
        pose = np.asarray(shape.pose, float)
        return self.scene.add_mesh_simple(
            name, V.astype(np.float32), F.astype(np.uint32), color=color, opacity=opacity,
            flat_shading=shape.kind == "box", side="double" if shape.kind in ("mesh", "plane") else "front",
            position=tuple(pose[:3, 3]), wxyz=wxyz(pose[:3, :3]), visible=visible,
            cast_shadow=False, receive_shadow=False)

    def _add_sensors(self, sensors):
        """IMU frames, F/T origins, range ray fans and camera frustums, fixed in their links."""
        for name, sensor, k in sensors:
            base = f"{self.root}/links/{k}/sensor/{len(self._sensors)}"
            pose = np.asarray(sensor.pose, float)
            entry = {"name": name, "type": sensor.type, "link": k, "pose": pose}
            if sensor.type in ("accelerometer", "gyro"):
                entry["node"] = self.scene.add_frame(base, axes_length=0.04 * self.size + 0.01,
                                                     axes_radius=0.004 * self.size + 0.001,
                                                     position=tuple(pose[:3, 3]), wxyz=wxyz(pose[:3, :3]), visible=False)
            elif sensor.type == "camera":
                width, height, fov, near, far = camera_parameters(sensor)
                T = pose @ OPTICAL_FRAME            # viser's frustum looks along +z, y down (optical)
                vfov = fov if height <= width else 2 * np.arctan(np.tan(fov / 2) * height / width)
                entry["node"] = self.scene.add_camera_frustum(
                    base, fov=float(vfov), aspect=width / height, scale=0.05 * self.size + 0.02,
                    color=(80, 160, 255), position=tuple(T[:3, 3]), wxyz=wxyz(T[:3, :3]), visible=False)
            elif sensor.type == "range":
                p = sensor.params
                entry["directions"] = range_directions(float(p.get("scanAngle", np.pi)), float(p.get("scanStep", 0.1)))
                entry["node"] = None            # the scan's points, once a reading arrives
            elif sensor.type == "force":
                entry["node"] = None            # an arrow, once a reading arrives
            self._sensors.append(entry)

    # -- each frame -------------------------------------------------------------------------
    def set_link_poses(self, link_R, link_p):
        """Move the links (world rotations (nl, 3, 3), positions (nl, 3)); only those that moved
        by more than POSE_TOLERANCE since the last call are sent."""
        n = len(self._frames)
        self.link_R[:] = link_R[:n]
        self.link_p[:] = link_p[:n]
        pose = np.concatenate([self.link_p, self.link_R.reshape(n, 9)], axis=1)
        moved = np.flatnonzero(np.abs(pose - self._sent).max(1, initial=0) > POSE_TOLERANCE)
        if len(moved):
            quats = wxyz_array(self.link_R[moved])      # only for the links sent
            for k, q in zip(moved, quats):
                set_pose(self._frames[k], self.link_p[k], q)
            self._sent[moved] = pose[moved]
        return len(moved)

    def set_contacts(self, points, forces, visible=True):
        """Contact points (n, 3) and the force on each (n, 3, N) as arrows of FORCE_SCALE m/N."""
        points = np.asarray(points, np.float32).reshape(-1, 3)
        forces = np.asarray(forces, np.float32).reshape(-1, 3)
        r = 0.006 + 0.004 * self.size
        if self._contacts is None:
            self._contacts = self.scene.add_point_cloud(
                f"{self.root}/contacts/points", points=np.zeros((1, 3), np.float32), colors=CONTACT_COLOR,
                point_size=2 * r, point_shape="circle", precision="float32", visible=False)
            self._contact_arrows = self.scene.add_arrows(
                f"{self.root}/contacts/forces", points=np.zeros((1, 2, 3), np.float32), colors=CONTACT_COLOR,
                shaft_radius=0.3 * r, head_radius=0.8 * r, head_length=2 * r, visible=False)
        shown = bool(visible and len(points))
        if shown:       # (one colour for all, set once: only the points change)
            update_props(self._contacts, points=points)
            update_props(self._contact_arrows,
                         points=np.stack([points, points + FORCE_SCALE * forces], axis=1).astype(np.float32))
        set_visible(self._contacts, shown)
        set_visible(self._contact_arrows, shown)

    def set_readings(self, readings, visible=True):
        """Sensor overlays from the newest readings: F/T force arrows, range scan points. A
        reading already drawn is not sent again (the devices replace a reading, never change it)."""
        for i, s in enumerate(self._sensors):
            r = readings.get(s["name"])
            if r is not None and r is s.get("drawn"):
                r = None
            elif r is not None:
                s["drawn"] = r
            base = f"{self.root}/links/{s['link']}/sensor/{i}"
            pose = s["pose"]
            if s["type"] == "force" and r is not None:
                f = pose[:3, :3] @ np.asarray(r.values[:3], float)     # sensor frame -> link frame
                seg = np.array([[pose[:3, 3], pose[:3, 3] + FORCE_SCALE * f]], np.float32)
                if s["node"] is None:
                    s["node"] = self.scene.add_arrows(base, points=seg, colors=WRENCH_COLOR, shaft_radius=0.004,
                                                      head_radius=0.01, head_length=0.02)
                else:
                    update_props(s["node"], points=seg)
            elif s["type"] == "range" and r is not None:
                ranges = np.asarray(r.values, float).reshape(-1)
                d = s["directions"][:len(ranges)]
                hit = np.isfinite(ranges[:len(d)]) & (ranges[:len(d)] > 0)
                pts = ((d[hit] * ranges[:len(d)][hit, None]) @ pose[:3, :3].T + pose[:3, 3]).astype(np.float32)
                if len(pts) == 0:
                    pts = np.zeros((1, 3), np.float32) + pose[:3, 3].astype(np.float32)
                if s["node"] is None:
                    s["node"] = self.scene.add_point_cloud(base, points=pts, colors=RANGE_COLOR,
                                                           point_size=0.01 + 0.005 * self.size, point_shape="circle",
                                                           precision="float32")      # as every later frame's
                else:
                    update_props(s["node"], points=pts)
            if s["node"] is not None:
                set_visible(s["node"], visible)

    def show(self, visual=None, collision=None, frames=None, com=None):
        """Toggle groups of nodes (None leaves a group as it is)."""
        for nodes, on in ((self._visuals, visual), (self._collisions, collision),
                          (self._axes, frames), (self._coms, com)):
            if on is not None:
                for node in nodes:
                    node.visible = bool(on)

    def link_pose(self, name):
        """The 4x4 world pose last set for link `name`."""
        k = self.link_names.index(name)
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = self.link_R[k], self.link_p[k]
        return T

    def bounds(self):
        """(lo, hi) of the link origins as last set (the camera's framing)."""
        if not len(self.link_p):
            return np.zeros(3), np.zeros(3)
        return self.link_p.min(0), self.link_p.max(0)

    def shape_nodes(self):
        return list(self._visuals) + list(self._collisions)

    def remove(self):
        """Take every node of this world out of the scene."""
        for s in self._sensors:
            if s["node"] is not None:
                s["node"].remove()
        for node in [self._contacts, self._contact_arrows] + self.shape_nodes() + self._axes + self._coms + self._frames:
            if node is not None:
                node.remove()


def set_visible(handle, on):
    if handle.visible != bool(on):
        handle.visible = bool(on)


def update_props(handle, **props):
    """Assign properties of a scene node or GUI element, one update message each. viser's own
    assignment casts every value against the props class's type hints (building numpy typing
    aliases: about 1 ms for a plot's data); the values here are already of the right dtype and
    shape, so they go straight out when this viser allows it."""
    impl = getattr(handle, "_impl", None)
    queue = getattr(handle, "_queue_update", None)
    if queue is None or not hasattr(impl, "props"):
        for key, value in props.items():
            setattr(handle, key, value)
        return
    for key, value in props.items():
        setattr(impl.props, key, value)
        queue(key, value.copy() if isinstance(value, np.ndarray) else value)    # the wire's own copy


def set_pose(handle, position, quat):
    """A scene node's position and orientation. viser's setters compare each value with
    np.allclose first (about 80 us each, most of a frame's cost); the links that moved are
    known here, so the messages are queued directly when this viser allows it."""
    p = (float(position[0]), float(position[1]), float(position[2]))
    q = (float(quat[0]), float(quat[1]), float(quat[2]), float(quat[3]))
    impl = getattr(handle, "_impl", None)
    queue = getattr(getattr(impl, "api", None), "_queue_scene_message", None)
    if queue is None:
        handle.position, handle.wxyz = p, q
        return
    from viser import _messages
    impl.position[:] = p
    impl.wxyz[:] = q
    queue(_messages.SetPositionMessage(impl.name, p))
    queue(_messages.SetOrientationMessage(impl.name, q))
