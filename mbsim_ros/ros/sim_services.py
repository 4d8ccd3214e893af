"""simulation_interfaces (the ROS 2 simulator standard) as a thin translation into Session calls.

Transport-independent: every method takes plain request fields and returns plain data with a
result code of simulation_interfaces/msg/Result (or a service's own code); node.py fills the
rosidl responses from them. Constants are the package's (mbsim_ros/data/interfaces).

Entities are the models, by name. GetEntityState also takes "<model>/<link>" for any link
(the model's root link for "<model>"). Poses, twists and accelerations are in the world frame
(header.frame_id "world"): the twist of a link is the world-frame linear velocity of its origin
and its world-frame angular velocity (common_interfaces' convention), the acceleration likewise,
taken from the last step (v_after - v_before) / dt, which is the acceleration the integrator
applied (contact and constraint forces included); it is zero where no step has been taken since
the state was set (t = 0, after a reset or SetEntityState).
SetEntityState's pose, twist and the frame they are given in: "" or "world", or another entity
("<model>" or "<model>/<link>"), whose current pose and velocity they are relative to.

Simulation states: playing (the runner paces), paused, stopped (a reset to t = 0, then paused:
what a STOPPED request does; play or step leave it), quitting (the node shuts down).
"""
from __future__ import annotations

import os
import re
import tempfile
import threading

import numpy as np

from ..model import ModelError
from ..model.transforms import inverse_transform, make_transform, matrix_to_quat, quat_to_matrix

# simulation_interfaces/msg/Result
FEATURE_UNSUPPORTED, OK, NOT_FOUND, INCORRECT_STATE, OPERATION_FAILED = 0, 1, 2, 3, 4
# simulation_interfaces/msg/SimulationState
STOPPED, PLAYING, PAUSED, QUITTING = 0, 1, 2, 3
# SetSimulationState response codes
ALREADY_IN_TARGET_STATE, STATE_TRANSITION_ERROR, INCORRECT_TRANSITION = 101, 102, 103
# SpawnEntity response codes
(NAME_NOT_UNIQUE, NAME_INVALID, UNSUPPORTED_FORMAT, NO_RESOURCE, NAMESPACE_INVALID, RESOURCE_PARSE_ERROR,
 MISSING_ASSETS, UNSUPPORTED_ASSETS, INVALID_POSE) = range(101, 110)
SET_INVALID_POSE = 101                       # SetEntityState's INVALID_POSE
# ResetSimulation scopes
SCOPE_DEFAULT, SCOPE_TIME, SCOPE_STATE, SCOPE_SPAWNED, SCOPE_ALL = 0, 1, 2, 4, 255
# simulation_interfaces/msg/EntityCategory
CATEGORY_OBJECT, CATEGORY_ROBOT, CATEGORY_STATIC_OBJECT = 0, 1, 5
# simulation_interfaces/msg/SimulatorFeatures
F = dict(SPAWNING=0, DELETING=1, ENTITY_CATEGORIES=8, SPAWNING_RESOURCE_STRING=9, ENTITY_STATE_GETTING=10,
         ENTITY_STATE_SETTING=11, ENTITY_INFO_GETTING=12, SPAWNABLES=14, SIMULATION_RESET=20,
         SIMULATION_RESET_TIME=21, SIMULATION_RESET_STATE=22, SIMULATION_RESET_SPAWNED=23,
         SIMULATION_STATE_GETTING=24, SIMULATION_STATE_SETTING=25, SIMULATION_STATE_PAUSE=26,
         STEP_SIMULATION_SINGLE=31, STEP_SIMULATION_MULTIPLE=32, STEP_SIMULATION_ACTION=33)

# file extension -> the format name spawn_formats lists
SPAWN_FORMATS = {".urdf": "urdf", ".wrl": "vrml", ".osim": "osim", ".yaml": "chrono_yaml", ".yml": "chrono_yaml"}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


class Entity:
    """A model's place in the world: its index, q and v offsets in the Simulation's state."""

    def __init__(self, sim, name):
        for k, model in enumerate(sim.models):
            if model.name == name:
                break
        else:
            raise KeyError(name)
        self.model = model
        self.q0 = sum(m.nq for m in sim.models[:k])
        self.v0 = sum(m.nv for m in sim.models[:k])

    def root(self):
        """The joint without a parent (the model's attachment to the world)."""
        return next(j for j in self.model.joints if j.parent is None) if self.model.joints else None


class SimulationInterfaces:
    """The services over `session` (ros/session.py). quit(): what STATE_QUITTING does (the node
    shuts down); None: quitting is refused."""

    def __init__(self, session, quit=None, spawnable_dirs=()):
        self.session = session
        self.runner = session.runner
        self.quit = quit
        self.stopped = False                 # reset and paused by a STOPPED request, not stepped since
        self.initial = [m.name for m in session.sim.models]
        self.spawnable_dirs = list(spawnable_dirs)
        # v after the last two steps (preallocated, swapped), for accelerations; their times
        self._v_prev, self._v_last = session.sim.v.copy(), session.sim.v.copy()
        self._t_prev = self._t_last = None
        step = self.runner.on_step

        def on_step(sim):                    # the physics thread, after each step
            if self._v_last.shape != sim.v.shape:
                self._v_prev, self._v_last = sim.v.copy(), sim.v.copy()
                self._t_last = None
            self._v_prev, self._v_last = self._v_last, self._v_prev
            np.copyto(self._v_last, sim.v)
            self._t_prev, self._t_last = self._t_last, sim.t
            if step is not None:
                step(sim)
        self.runner.on_step = on_step

    def _forget_steps(self):
        """The state was set, not stepped to: no acceleration until the next two steps."""
        self._t_prev = self._t_last = None

    @property
    def sim(self):
        return self.session.sim

    def _physics(self, fn, timeout=10.0):
        """fn() in the physics thread between steps (at once when the runner is not running);
        returns its value or raises its exception."""
        done, box = threading.Event(), {}

        def job():
            try:
                box["value"] = fn()
            except BaseException as e:       # handed back to the caller's thread
                box["error"] = e
            done.set()
        self.runner.submit(job)
        if not done.wait(timeout):
            raise TimeoutError("the simulation thread did not answer within %g s" % timeout)
        if "error" in box:
            raise box["error"]
        return box["value"]

    # -- features ----------------------------------------------------------------------------
    def can_spawn(self):
        return hasattr(self.sim, "add_model") and hasattr(self.session, "spawn")

    def can_delete(self):
        return hasattr(self.sim, "remove_model") and hasattr(self.session, "delete")

    def features(self):
        """(feature codes, spawn formats, custom info): exactly what this node does."""
        names = ["ENTITY_CATEGORIES", "ENTITY_STATE_GETTING", "ENTITY_STATE_SETTING", "ENTITY_INFO_GETTING",
                 "SIMULATION_RESET", "SIMULATION_RESET_TIME", "SIMULATION_RESET_STATE",
                 "SIMULATION_STATE_GETTING", "SIMULATION_STATE_SETTING", "SIMULATION_STATE_PAUSE",
                 "STEP_SIMULATION_SINGLE", "STEP_SIMULATION_MULTIPLE", "STEP_SIMULATION_ACTION"]
        if self.can_spawn():
            names += ["SPAWNING", "SPAWNING_RESOURCE_STRING", "SPAWNABLES"]
        if self.can_delete():
            names += ["DELETING", "SIMULATION_RESET_SPAWNED"]
        formats = sorted(set(SPAWN_FORMATS.values())) if self.can_spawn() else []
        return sorted(F[n] for n in names), formats, (
            "mbsim_ros: entities are models; GetEntityState also takes <model>/<link>; "
            "ResetSimulation resets time and state together")

    # -- simulation state --------------------------------------------------------------------
    def state(self):
        if self.stopped:
            return STOPPED
        return PAUSED if self.runner.paused else PLAYING

    def set_state(self, target):
        """(code, message) of a SetSimulationState request."""
        current = self.state()
        if target == current:
            return ALREADY_IN_TARGET_STATE, f"already in state {target}"
        if target == PLAYING:
            self.stopped = False
            self.runner.resume()
            return OK, "playing"
        if target == PAUSED:
            if current == STOPPED:
                return INCORRECT_TRANSITION, "the simulation is stopped: play it (or step it) first"
            if not self.runner.pause(wait=True, timeout=10.0):
                return STATE_TRANSITION_ERROR, "the simulation did not pause within 10 s"
            return OK, "paused"
        if target == STOPPED:
            if not self.runner.pause(wait=True, timeout=10.0):
                return STATE_TRANSITION_ERROR, "the simulation did not pause within 10 s"
            self._reset()
            self.stopped = True
            return OK, "stopped: reset to t = 0 and paused"
        if target == QUITTING:
            if self.quit is None:
                return FEATURE_UNSUPPORTED, "quitting is not offered here"
            self.runner.pause()
            self.quit()
            return OK, "quitting"
        return FEATURE_UNSUPPORTED, f"state {target}: expected 0 (stopped), 1 (playing), 2 (paused) or 3 (quitting)"

    # -- stepping -------------------------------------------------------------------------------
    def step(self, steps, feedback=None, cancelled=None, chunk=None):
        """(code, message) of StepSimulation / SimulateSteps: `steps` steps from a paused state,
        then paused again. feedback(completed, remaining) after each chunk of steps (default:
        about 20 feedbacks); cancelled() checked between chunks (then OPERATION_FAILED)."""
        steps = int(steps)
        if self.state() == PLAYING:
            return OPERATION_FAILED, "the simulation is playing: pause it first (SetSimulationState)"
        if steps < 1:
            return OPERATION_FAILED, f"steps must be >= 1, got {steps}"
        self.stopped = False
        chunk = chunk or max(1, steps // 20)
        done = 0
        while done < steps:
            if cancelled is not None and cancelled():
                return OPERATION_FAILED, f"cancelled after {done} of {steps} steps"
            n = min(chunk, steps - done)
            if not self.runner.step_once(n, wait=True, timeout=max(10.0, 0.05 * n)):
                return OPERATION_FAILED, f"the simulation did not take {n} steps (after {done} of {steps})"
            done += n
            if feedback is not None:
                feedback(done, steps - done)
        return OK, f"t = {self.sim.t:.6f} s"

    # -- reset --------------------------------------------------------------------------------
    def _reset(self):
        """Time and state to the start (Session.reset, in the physics thread), and wait for it."""
        self.session.reset()
        self._physics(self._forget_steps)

    def reset(self, scope):
        """(code, message) of ResetSimulation. Time and state are reset together (the one reset
        the Simulation has): a scope with one of them and not the other is unsupported."""
        scope = SCOPE_ALL if scope == SCOPE_DEFAULT else int(scope)
        time_, state, spawned = bool(scope & SCOPE_TIME), bool(scope & SCOPE_STATE), bool(scope & SCOPE_SPAWNED)
        if time_ != state:
            return FEATURE_UNSUPPORTED, "time and state reset together here: give both SCOPE_TIME and SCOPE_STATE"
        if spawned:
            extra = [n for n in self.entity_names() if n not in self.initial]
            if extra and not self.can_delete():
                return FEATURE_UNSUPPORTED, "this simulation cannot remove models"
            for name in extra:
                self.session.delete(name)
        if time_:
            self._reset()
        self.stopped = False
        return OK, "reset"

    # -- entities -----------------------------------------------------------------------------
    def entity_names(self):
        return [m.name for m in self.sim.models]

    @staticmethod
    def category(model):
        """STATIC_OBJECT without degrees of freedom; ROBOT with a moving joint below its root;
        OBJECT otherwise (a free body)."""
        if model.nv == 0:
            return CATEGORY_STATIC_OBJECT
        if any(j.parent is not None and j.type != "fixed" for j in model.joints):
            return CATEGORY_ROBOT
        return CATEGORY_OBJECT

    def entities(self, pattern="", categories=(), tags=(), bounds_type=0):
        """(code, message, names) of GetEntities: names matching the regular expression
        `pattern` (searched), of any of `categories`. Tags and bounds filters are unsupported."""
        if tags:
            return FEATURE_UNSUPPORTED, "entities have no tags here", []
        if bounds_type:
            return FEATURE_UNSUPPORTED, "bounds filters are not supported", []
        try:
            rx = re.compile(pattern or "")
        except re.error as e:
            return OPERATION_FAILED, f"filter {pattern!r} is not a regular expression: {e}", []
        names = [m.name for m in self.sim.models if rx.search(m.name)
                 and (not categories or self.category(m) in categories)]
        return OK, "", names

    def entity_info(self, name):
        """(code, message, (category, description, tags))."""
        model = next((m for m in self.sim.models if m.name == name), None)
        if model is None:
            return NOT_FOUND, self._unknown(name), None
        joints = sum(1 for j in model.joints if j.type != "fixed")
        return OK, "", (self.category(model), f"{model.name}: {len(model.links)} links, {joints} moving joints", [])

    def _unknown(self, name):
        return f"no entity {name!r}; entities: {', '.join(self.entity_names())}"

    def _resolve(self, name):
        """(Entity, link name) of "<model>" (its root link) or "<model>/<link>"; KeyError."""
        model_name, _, link = name.partition("/")
        entity = Entity(self.sim, model_name)
        if not link:
            root = entity.root()
            link = root.child if root is not None else entity.model.links[0].name
        elif link not in {l.name for l in entity.model.links}:
            raise KeyError(name)
        return entity, link

    def _kinematics(self, entity, link):
        """(T 4x4, twist 6, acceleration 6) of a link in the world (physics thread)."""
        from ..dynamics import link_accelerations, link_transforms, link_velocities
        sim, m = self.sim, entity.model
        q = sim.q[entity.q0:entity.q0 + m.nq].copy()
        v = sim.v[entity.v0:entity.v0 + m.nv].copy()
        T = link_transforms(m, q)[link]
        twist = link_velocities(m, q, v)[link]
        acc = np.zeros(6)
        if (self._t_last == sim.t and self._t_prev is not None
                and abs(self._t_last - self._t_prev - sim.dt) < 1e-9 * max(1.0, sim.t)):
            qdd = (self._v_last - self._v_prev)[entity.v0:entity.v0 + m.nv] / sim.dt
            acc = link_accelerations(m, q, v, qdd)[link]
        return T, twist, acc

    def entity_state(self, name):
        """(code, message, state) of GetEntityState; state: dict(stamp, frame, position,
        orientation (x, y, z, w), linear, angular, linear_acceleration, angular_acceleration)."""
        try:
            entity, link = self._resolve(name)
        except KeyError:
            return NOT_FOUND, self._unknown(name), None
        T, twist, acc, t = self._physics(lambda: self._kinematics(entity, link) + (self.sim.t,))
        return OK, "", dict(stamp=t, frame="world", position=T[:3, 3].copy(), orientation=matrix_to_quat(T[:3, :3]),
                            linear=twist[:3], angular=twist[3:], linear_acceleration=acc[:3],
                            angular_acceleration=acc[3:])

    def entities_states(self, pattern="", categories=(), tags=(), bounds_type=0):
        code, message, names = self.entities(pattern, categories, tags, bounds_type)
        if code != OK:
            return code, message, [], []
        states = [self.entity_state(n)[2] for n in names]
        return OK, "", names, states

    def _frame(self, frame):
        """(T, twist) of a reference frame name in the world (physics thread); KeyError."""
        if frame in ("", "world"):
            return np.eye(4), np.zeros(6)
        entity, link = self._resolve(frame)
        T, twist, _ = self._kinematics(entity, link)
        return T, twist

    def set_entity_state(self, name, frame, position, orientation, linear, angular):
        """(code, message) of SetEntityState: the model's free root joint takes the pose and twist
        (of its root link, relative to `frame`); the other joints keep theirs."""
        try:
            entity, link = self._resolve(name)
        except KeyError:
            return NOT_FOUND, self._unknown(name)
        if "/" in name:
            return OPERATION_FAILED, f"{name!r}: only a model's root can be set (give the model's name)"
        root = entity.root()
        twist = np.concatenate([np.asarray(linear, float), np.asarray(angular, float)])
        if root is None or root.type != "free":
            if root is None or root.type == "fixed" or entity.model.nv == 0:
                return OPERATION_FAILED, (f"{name!r} is fixed to the world (no free root joint): it cannot be "
                                          "moved")
            return OPERATION_FAILED, f"{name!r}'s root joint is {root.type}, not free: it cannot be teleported"
        quat = np.asarray(orientation, float)
        pos = np.asarray(position, float)
        norm = float(np.linalg.norm(quat))
        if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(quat)) and abs(norm - 1.0) < 1e-3):
            return SET_INVALID_POSE, (f"pose of {name!r}: position {pos.tolist()} and a unit quaternion (x, y, z, w) "
                                      f"expected, got {quat.tolist()} (norm {norm:.6g})")
        if not np.all(np.isfinite(twist)):
            return OPERATION_FAILED, f"twist of {name!r} must be finite, got {twist.tolist()}"

        def apply():
            try:
                T_ref, twist_ref = self._frame(frame)
            except KeyError:
                return NOT_FOUND, f"reference frame {frame!r}: " + self._unknown(frame)
            T_link = T_ref @ make_transform(quat_to_matrix(quat / norm), pos)
            R_ref = T_ref[:3, :3]
            w = twist_ref[3:] + R_ref @ twist[3:]
            v_link = twist_ref[:3] + np.cross(twist_ref[3:], T_link[:3, 3] - T_ref[:3, 3]) + R_ref @ twist[:3]
            # the joint's child frame J = link @ child_pose, in the joint's parent frame (origin)
            T_J = T_link @ root.child_pose
            X = inverse_transform(root.origin) @ T_J
            v_J = v_link + np.cross(w, T_J[:3, 3] - T_link[:3, 3])
            R_J = T_J[:3, :3]
            sim = self.sim
            iq, iv = entity.q0 + root.q_index, entity.v0 + root.v_index
            sim.q[iq:iq + 3] = X[:3, 3]
            sim.q[iq + 3:iq + 7] = matrix_to_quat(X[:3, :3])
            sim.v[iv:iv + 3] = R_J.T @ v_J
            sim.v[iv + 3:iv + 6] = R_J.T @ w
            self._forget_steps()
            return OK, ""
        return self._physics(apply)

    # -- spawning -----------------------------------------------------------------------------
    def spawnables(self):
        """(code, message, [(uri, description)]): the model files in the bundled models folder and
        the configured folders."""
        if not self.can_spawn():
            return FEATURE_UNSUPPORTED, "this simulation cannot add models", []
        from .world import DATA
        out = []
        for folder in [DATA] + self.spawnable_dirs:
            for entry in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
                if os.path.splitext(entry)[1].lower() in SPAWN_FORMATS:
                    path = os.path.join(folder, entry)
                    out.append(("file://" + os.path.abspath(path), f"{SPAWN_FORMATS[os.path.splitext(entry)[1].lower()]} model"))
        return OK, "", out

    def _load(self, uri, resource_string):
        """(Model or None, code, message) from a URI (file://, package://, a path) or a resource
        string in any of our formats."""
        from ..formats import load_model
        if uri:
            path = resolve_uri(uri)
            if isinstance(path, tuple):
                return None, *path
        else:
            suffix = guess_suffix(resource_string)
            if suffix is None:
                return None, UNSUPPORTED_FORMAT, ("resource_string is none of " + ", ".join(sorted(set(SPAWN_FORMATS.values())))
                                                  + " (by its content)")
            fd, path = tempfile.mkstemp(suffix=suffix, prefix="mbsim_spawn_")
            with os.fdopen(fd, "w") as f:
                f.write(resource_string)
        ext = os.path.splitext(path)[1].lower()
        if ext not in SPAWN_FORMATS and ext != ".xml":
            return None, UNSUPPORTED_FORMAT, f"{uri}: unknown model format {ext!r}; spawn_formats: " + \
                ", ".join(sorted(set(SPAWN_FORMATS.values())))
        try:
            return load_model(path), OK, ""
        except (ModelError, OSError, ValueError) as e:
            return None, RESOURCE_PARSE_ERROR, str(e)
        finally:
            if not uri:
                os.unlink(path)

    def spawn(self, name, allow_renaming, uri, resource_string, namespace, frame, position, orientation):
        """(code, message, entity name) of SpawnEntity."""
        if not self.can_spawn():
            return FEATURE_UNSUPPORTED, "this simulation cannot add models", ""
        if not uri and not resource_string:
            return NO_RESOURCE, "both uri and resource_string are empty", ""
        if namespace:
            return NAMESPACE_INVALID, "entity_namespace is not supported: leave it empty", ""
        if name and not NAME.match(name):
            return NAME_INVALID, f"name {name!r}: letters, digits and _ expected, not starting with a digit", ""
        quat, pos = np.asarray(orientation, float), np.asarray(position, float)
        norm = float(np.linalg.norm(quat))
        if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(quat)) and abs(norm - 1.0) < 1e-3):
            return INVALID_POSE, f"initial_pose: a unit quaternion (x, y, z, w) expected, got {quat.tolist()}", ""
        model, code, message = self._load(uri, resource_string)
        if model is None:
            return code, message, ""
        name = name or model.name
        taken = set(self.entity_names())
        if name in taken:
            if not allow_renaming:
                return NAME_NOT_UNIQUE, f"an entity named {name!r} exists (allow_renaming is false)", ""
            k = 1
            while f"{name}_{k}" in taken:
                k += 1
            name = f"{name}_{k}"
        try:
            T_ref = self._physics(lambda: self._frame(frame)[0])
        except KeyError:
            return INVALID_POSE, f"initial_pose frame {frame!r}: " + self._unknown(frame), ""
        T = T_ref @ make_transform(quat_to_matrix(quat / norm), pos)
        try:
            spawned = self.session.spawn(model, name=name, pose=T)
        except (ModelError, ValueError) as e:
            return OPERATION_FAILED, str(e), ""
        return OK, "", spawned

    def delete(self, name):
        """(code, message) of DeleteEntity."""
        if not self.can_delete():
            return FEATURE_UNSUPPORTED, "this simulation cannot remove models"
        if name not in self.entity_names():
            return NOT_FOUND, self._unknown(name)
        if len(self.sim.models) == 1:
            return OPERATION_FAILED, f"{name!r} is the last model: a simulation needs one"
        try:
            self.session.delete(name)
        except (KeyError, ValueError) as e:
            return OPERATION_FAILED, str(e)
        return OK, ""


def resolve_uri(uri):
    """A local path for file://, package:// (through the ament index) or a plain path; or
    (code, message) when it cannot be had."""
    if uri.startswith("file://"):
        path = uri[len("file://"):]
    elif uri.startswith("package://"):
        package, _, rest = uri[len("package://"):].partition("/")
        try:
            from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
        except ImportError:
            return RESOURCE_PARSE_ERROR, f"{uri}: package:// needs ament_index_python (a sourced ROS 2)"
        try:
            path = os.path.join(get_package_share_directory(package), rest)
        except PackageNotFoundError:
            return RESOURCE_PARSE_ERROR, f"{uri}: no ROS package {package!r} in the ament index"
    elif "://" in uri:
        return UNSUPPORTED_FORMAT, f"{uri}: file://, package:// or a path expected"
    else:
        path = uri
    if not os.path.isfile(path):
        return RESOURCE_PARSE_ERROR, f"{uri}: no such file {path}"
    return path


def guess_suffix(text):
    """The file extension of a model given as text, by its content."""
    head = text.lstrip()[:4096]
    if head.startswith("#VRML"):
        return ".wrl"
    if "<robot" in head:
        return ".urdf"
    if "<OpenSimDocument" in head:
        return ".osim"
    if head and not head.startswith("<"):
        return ".yaml"
    return None

