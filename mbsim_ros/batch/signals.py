"""The recorded signals of one run, what metrics and tests read (no simulation attached: they
pickle, travel between processes and outlive the run).

    sig.t, sig.q, sig.v, sig.tau       per step (row 0 the initial state; tau: what the step applied)
    sig.contact_force                  per step: the largest single contact force's magnitude (N)
    sig.readings[name]                 (stamps, values) of each accelerometer, gyro and force sensor
    sig.joint("RLEG_KNEE")             a DOF's position over time (a /joint_states name)
    sig.root_position, root_quaternion, tilt     the first model's floating base
    sig.joint_torque                   per step and DOF: applied tau plus the joint's spring-damper
    sig.metric("max_tilt")             a built-in metric (metrics.py)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Signals:
    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    contact_force: np.ndarray
    readings: dict
    dt: float
    dofs: dict                       # DOF name -> (q index, v index), one-coordinate joints
    root: int | None                 # q index of the first model's free root joint, else None
    root_name: str | None
    stiffness: np.ndarray            # per v: joint springs and dampers (for joint_torque)
    damping: np.ndarray
    rest: np.ndarray                 # per v: spring rest position (q of the DOF), nan where none
    dof_q: np.ndarray = field(default_factory=lambda: np.zeros(0, int))

    @classmethod
    def of(cls, sim, dofs, t, q, v, tau, contact, readings):
        """dofs: [(name, q index, v index, ...)] as the Bridge names them on /joint_states."""
        root, root_name = None, None
        nv = sim.nv
        stiffness, damping, rest = np.zeros(nv), np.zeros(nv), np.full(nv, np.nan)
        q_off = v_off = 0
        for m, model in enumerate(sim.models):
            for j in model.joints:
                if j.type == "free" and j.parent is None and m == 0 and root is None:
                    root, root_name = q_off + j.q_index, j.child
                if j.type in ("fixed", "ball", "free"):
                    continue
                for k in range(j.nv):
                    iv = v_off + j.v_index + k
                    stiffness[iv], damping[iv], rest[iv] = j.stiffness[k], j.damping[k], j.rest_position[k]
            q_off += model.nq
            v_off += model.nv
        dofs = {d[0]: (int(d[1]), int(d[2])) for d in dofs}
        dof_q = np.array([iq for iq, _ in dofs.values()], dtype=int)
        return cls(t, q, v, tau, contact, readings, sim.dt, dofs, root, root_name, stiffness, damping, rest, dof_q)

    def joint(self, name):
        """A DOF's position over time (the names of /joint_states)."""
        if name not in self.dofs:
            raise KeyError(f"no joint DOF named {name!r}; DOFs: {', '.join(self.dofs)}")
        return self.q[:, self.dofs[name][0]]

    def _need_root(self):
        if self.root is None:
            raise ValueError("this metric needs a floating base: the first model has no free root joint")
        return self.root

    @property
    def root_position(self):
        r = self._need_root()
        return self.q[:, r:r + 3]

    @property
    def root_quaternion(self):
        """(x, y, z, w) per step."""
        r = self._need_root()
        return self.q[:, r + 3:r + 7]

    @property
    def tilt(self):
        """Angle (rad) between the floating base's z axis and the world's vertical, per step."""
        x, y, z, w = self.root_quaternion.T
        # cos(tilt) = R[2, 2] = 1 - 2 (x^2 + y^2); the half-angle form keeps small tilts exact
        return 2.0 * np.arctan2(np.sqrt(x * x + y * y), np.sqrt(z * z + w * w))

    @property
    def joint_torque(self):
        """Per step, per one-coordinate DOF (in dofs order): the applied tau plus the joint's
        spring and damper (what holds the joints in `hold`) at that step's state."""
        iv = np.array([v for _, v in self.dofs.values()], dtype=int)
        if not len(iv):
            return np.zeros((len(self.t), 0))
        rest = np.where(np.isnan(self.rest[iv]), 0.0, self.rest[iv])
        spring = -self.stiffness[iv] * (self.q[:, self.dof_q] - rest) - self.damping[iv] * self.v[:, iv]
        return self.tau[:, iv] + spring

    def metric(self, name, **options):
        """A built-in metric of these signals (metrics.BUILTIN)."""
        from .metrics import BUILTIN
        if name not in BUILTIN:
            raise KeyError(f"unknown metric {name!r}; built-ins: {', '.join(BUILTIN)}")
        return BUILTIN[name](self, **options)
