"""Joint control, no ROS: PD position/velocity tracking and efforts per DOF, turned into sim.tau
before each step. The Session owns one JointController; the ROS joint_commands / joint_efforts
topics, serial command readers and tests give it commands as plain calls."""
from __future__ import annotations

import numpy as np


def joint_dofs(sim):
    """[(DOF world name, q index, v index, joint world name)] of every joint with one coordinate
    per DOF (not fixed, ball or free), in model order: the DOFs joint_states and joint commands
    name."""
    names = sim.names
    out = []
    for k, (entity, model) in enumerate(zip(sim.entities, sim.models)):
        _, q_off, v_off = sim.compiled.offsets[k]
        joint = names.table(entity, "joint")
        dof_names = model.dof_names
        for j in model.joints:
            if j.type not in ("fixed", "ball", "free"):
                for i in range(j.nv):
                    out.append((joint[dof_names[j.v_index + i]], q_off + j.q_index + i, v_off + j.v_index + i,
                                joint[j.name]))
    return out


class JointController:
    """Efforts and PD targets from the command topics, turned into sim.tau before each step:
    tau = effort + kp (q* - q) + kd (v* - v), the PD terms where a target is set (v* = 0 where
    only q* is).

    A JointState command names joints (DOFs); each of position, velocity, effort is either empty
    (not commanded: that interface unchanged for the named joints), one value per name (NaN: not
    commanded, unchanged, for that joint; ros2_control's command interfaces are NaN until a
    controller writes them), or shorter: one value per named
    joint that `interfaces` ({joint: [position, velocity, effort]}) gives that interface, in name
    order, as joint_state_topic_hardware_interface sends them. A joint listed in `interfaces`
    takes only its interfaces from full arrays too (topic_based_ros2_control sends 0 for the
    others). A joint given a position interface holds its initial position until commanded (as a
    servo does when powered), so a robot stands while its controllers start."""

    def __init__(self, sim, dofs, gains, interfaces=None):
        nv = sim.nv
        self.effort = np.zeros(nv)
        self.q_target = np.full(nv, np.nan)
        self.v_target = np.full(nv, np.nan)
        self.kp = np.zeros(nv)
        self.kd = np.zeros(nv)
        self.q_of_v = np.full(nv, -1)
        self.index = {}                    # DOF name -> v index
        self.interfaces = dict(interfaces or {})
        default = gains.get("default", [0.0, 0.0])
        for name, iq, iv, joint in dofs:
            self.index[name] = iv
            self.q_of_v[iv] = iq
            self.kp[iv], self.kd[iv] = gains.get(name, gains.get(joint, default))
            if "position" in self.interfaces.get(name, ()):
                self.q_target[iv] = sim.q[iq]
        self.active = bool(np.isfinite(self.q_target).any())

    def adopt(self, old):
        """Keep the efforts and targets `old` held for the DOFs (by name) still in the world."""
        for name, iv in self.index.items():
            if name in old.index:
                j = old.index[name]
                self.effort[iv], self.q_target[iv], self.v_target[iv] = old.effort[j], old.q_target[j], old.v_target[j]
        self.active = old.active

    def command(self, names, position=None, velocity=None, effort=None):
        """A command naming DOFs, with position, velocity and effort arrays as a JointState
        carries them; returns an error text (the command ignored) or None."""
        names = list(names)
        unknown = [n for n in names if n not in self.index]
        if unknown:
            return f"joint_commands: unknown joint(s) {', '.join(unknown)}"
        columns = []
        for kind, values in (("position", position), ("velocity", velocity), ("effort", effort)):
            if values is None or len(values) == 0:
                continue
            if len(values) == len(names):     # one per name; a joint given interfaces takes only those
                keep = [k for k, n in enumerate(names) if kind in self.interfaces.get(n, (kind,))]
                takers, values = [names[k] for k in keep], np.asarray(values, dtype=float)[keep]
            else:
                takers = [n for n in names if kind in self.interfaces.get(n, ())]
                if len(takers) != len(values):
                    return (f"joint_commands: {len(values)} {kind} value(s) for {len(names)} names; expected one per "
                            f"name (NaN: not commanded) or one per named joint with a {kind} interface in "
                            f"command_interfaces ({len(takers)}: {', '.join(takers) or 'none'})")
            if np.isinf(values).any():
                return f"joint_commands: {kind} values must be finite or NaN (not commanded), got {list(values)}"
            columns.append((kind, [self.index[n] for n in takers], np.asarray(values, dtype=float)))
        for kind, iv, values in columns:
            target = self.q_target if kind == "position" else self.v_target if kind == "velocity" else self.effort
            given = ~np.isnan(values)
            target[np.asarray(iv, dtype=int)[given]] = values[given]
        self.active = True
        return None

    def efforts(self, values):
        """Every DOF's effort, in model order; returns an error text (ignored) or None."""
        if len(values) != len(self.effort):
            return f"joint_efforts: expected {len(self.effort)} values (every DOF in model order), got {len(values)}"
        self.effort[:] = values
        self.active = True
        return None

    def apply(self, sim):
        """sim.tau for the next step (nothing while no command or position interface is set)."""
        if not self.active:
            return
        tau = self.effort.copy()
        has_q = ~np.isnan(self.q_target)
        if has_q.any():
            iq = self.q_of_v[has_q]
            tau[has_q] += self.kp[has_q] * (self.q_target[has_q] - sim.q[iq])
        v_target = np.where(has_q & np.isnan(self.v_target), 0.0, self.v_target)
        has_v = ~np.isnan(v_target)
        if has_v.any():
            tau[has_v] += self.kd[has_v] * (v_target[has_v] - sim.v[has_v])
        sim.tau = tau
