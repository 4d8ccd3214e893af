"""Helpers for the OpenSim loader tests: the Model's link poses in plain numpy (the Model
contract, independent of the dynamics kernels) and OpenSim's own poses and accelerations
through its Python package (the ground truth)."""
import os
import pathlib
import re

import numpy as np

from mbsim_ros.model.transforms import axis_angle_to_matrix, quat_to_matrix


# -- the Model's kinematics, straight from model.py's definitions ---------------------------
def _rot(axis, angle):
    T = np.eye(4)
    T[:3, :3] = axis_angle_to_matrix(np.asarray(axis, float) / np.linalg.norm(axis), angle)
    return T


def _trans(p):
    T = np.eye(4)
    T[:3, 3] = p
    return T


def joint_motion(joint, q):
    """J(q) of model.py for one joint (q: the joint's own coordinates)."""
    t = joint.type
    if t == "fixed":
        return np.eye(4)
    if t == "revolute":
        return _rot(joint.axis, q[0])
    if t == "prismatic":
        return _trans(joint.axis * q[0])
    if t == "universal":
        return _rot(joint.axis, q[0]) @ _rot(joint.axis2, q[1])
    if t == "euler":
        axes = {"x": (1, 0, 0), "y": (0, 1, 0), "z": (0, 0, 1)}
        T = np.eye(4)
        for k, a in enumerate(joint.euler_order):
            T = T @ _rot(axes[a], q[k])
        return T
    if t == "planar":
        x_p, y_p = joint.plane_axes()
        return _trans(x_p * q[0] + y_p * q[1]) @ _rot(joint.axis, q[2])
    if t == "translational":
        return _trans(q[:3])
    if t == "ball":
        T = np.eye(4)
        T[:3, :3] = quat_to_matrix(q)
        return T
    if t == "free":
        T = _trans(q[:3])
        T[:3, :3] = quat_to_matrix(q[3:])
        return T
    if t == "custom":
        T = np.eye(4)
        p = np.zeros(3)
        for k, ta in enumerate(joint.transform_axes):
            value = float(ta.function(q[ta.coordinate] if ta.coordinate >= 0 else 0.0))
            if k < 3:
                T = T @ _rot(ta.axis, value)
            else:
                p += value * ta.axis
        if joint.ellipsoid_radii is not None:      # Simbody's Ellipsoid mobilizer: + diag(radii) R z
            p += joint.ellipsoid_radii * T[:3, 2]
        T[:3, 3] = p
        return T
    raise ValueError(f"joint type {t}")


def link_poses(model, q=None):
    """{link: 4x4 world pose}: T_child = T_parent @ origin @ J(q) @ inv(child_pose)."""
    q = model.initial_q() if q is None else np.asarray(q, float)
    out = {}
    for j in model.joints:
        parent = np.eye(4) if j.parent is None else out[j.parent]
        out[j.child] = parent @ j.origin @ joint_motion(j, q[j.q_index:j.q_index + j.nq]) @ np.linalg.inv(j.child_pose)
    return out


def angle_between(R1, R2):
    """Rotation angle of R1^T R2 (rad), accurate near zero."""
    D = R1.T @ R2
    s = np.linalg.norm([D[2, 1] - D[1, 2], D[0, 2] - D[2, 0], D[1, 0] - D[0, 1]]) / 2
    c = (np.trace(D) - 1) / 2
    return float(np.arctan2(s, c))


# -- OpenSim ----------------------------------------------------------------------------
def opensim():
    """The opensim package with its log file off (it writes opensim.log in the working
    directory otherwise) and only errors printed."""
    import opensim as osim
    osim.Logger.removeFileSink()
    osim.Logger.setLevelString("error")
    return osim


def without_forces(path, folder):
    """A copy of an .osim file with its ForceSet emptied (OpenSim refuses some old muscle
    parameters; the comparisons disable every force anyway)."""
    text = pathlib.Path(path).read_text()
    text = re.sub(r"(<ForceSet[^>]*>).*?(</ForceSet>)", r"\1<objects />\2", text, count=1, flags=re.S)
    out = pathlib.Path(folder) / ("noforces_" + os.path.basename(path))
    out.write_text(text)
    return out


class OpenSimState:
    """An OpenSim model at a state, with every force off, constraints and locks released, and
    coordinates set and read by name."""

    def __init__(self, path, tmp_path, gravity=True, controllers=True):
        osim = opensim()

        def build(file):
            model = osim.Model(str(file))
            if not gravity:
                model.setGravity(osim.Vec3(0, 0, 0))
            if not controllers:     # controls are then ours to set (setControls)
                model.updControllerSet().clearAndDestroy()
            model.finalizeFromProperties()
            return model, model.initSystem()
        try:
            self.model, self.state = build(path)
        except RuntimeError:
            self.model, self.state = build(without_forces(path, tmp_path))
        m, s = self.model, self.state
        forces = m.getForceSet()
        for k in range(forces.getSize()):
            forces.get(k).setAppliesForce(s, False)
        constraints = m.getConstraintSet()
        for k in range(constraints.getSize()):
            constraints.get(k).setIsEnforced(s, False)
        cs = m.getCoordinateSet()
        self.coords = [cs.get(k) for k in range(cs.getSize())]
        for c in self.coords:
            c.setLocked(s, False)
        # the index of each coordinate in OpenSim's Q vector: the slot that moves with it
        self.q_index = {}
        for c in self.coords:
            before = self.vector(s.getQ())
            value = c.getValue(s)
            c.setValue(s, value + 0.125, False)
            moved = np.abs(self.vector(s.getQ()) - before)
            c.setValue(s, value, False)
            self.q_index[self.key(c)] = int(np.argmax(moved))
        # and in its U vector
        self.u_index = {}
        for c in self.coords:
            before = self.vector(s.getU())
            speed = c.getSpeedValue(s)
            c.setSpeedValue(s, speed + 0.125)
            self.u_index[self.key(c)] = int(np.argmax(np.abs(self.vector(s.getU()) - before)))
            c.setSpeedValue(s, speed)

    @staticmethod
    def key(c):
        return (c.getJoint().getName(), c.getName())

    def set_defaults(self):
        for c in self.coords:
            c.setValue(self.state, c.getDefaultValue(), False)
            c.setSpeedValue(self.state, 0.0)
        self.model.realizePosition(self.state)

    def body_poses(self):
        out = {}
        for b in list(self.model.getBodySet()):
            X = b.getTransformInGround(self.state)
            R = np.array([[X.R().get(i, k) for k in range(3)] for i in range(3)])
            p = np.array([X.p().get(i) for i in range(3)])
            out[b.getName()] = (R, p)
        return out

    def vector(self, v):
        return np.array([v.get(i) for i in range(v.size())])

    def rate_matrix(self, keys):
        """N with OpenSim's q-dot = N u over the coordinates `keys` at the current q: the
        identity except for Ball and Free rotations (u their angular velocity)."""
        coords = {self.key(c): c for c in self.coords}
        N = np.zeros((len(keys), len(keys)))
        for col, key in enumerate(keys):
            for other in keys:
                coords[other].setSpeedValue(self.state, 0.0)
            coords[key].setSpeedValue(self.state, 1.0)
            self.model.realizeVelocity(self.state)
            qd = self.vector(self.state.getQDot())
            N[:, col] = [qd[self.q_index[k]] for k in keys]
        for key in keys:
            coords[key].setSpeedValue(self.state, 0.0)
        return N
