"""simulation_interfaces (the ROS 2 simulator standard) as a thin translation into Session calls.

Transport-independent: every method takes plain request fields and returns plain data with a
result code of simulation_interfaces/msg/Result (or a service's own code); node.py fills the
rosidl responses from them. Constants are the package's (mbsim_ros/data/interfaces).

Entities are the models, by their entity names (Simulation.model_names). GetEntityState also
takes "<model>/<link>" for any link (the model's root link for "<model>"). Poses, twists and
accelerations are in the world frame (header.frame_id "world"; entity_state takes another entity
as the frame, as SetEntityState does, but the standard request has no field for it): the twist of a link is the
world-frame linear velocity of its origin and its world-frame angular velocity (common_interfaces'
convention), the acceleration the classical one of its origin over the last step
(Simulation.link_pose, link_twist, link_acceleration).
SetEntityState's pose and twist are those of the model's root link in a frame: "" or "world", or
another entity ("<model>" or "<model>/<link>"), whose current pose and velocity they are relative
to. A model with a free root is teleported; another is moved rigidly (its world frame), without
a twist.
SpawnEntity loads a file URI (file://, package://, a path) or a resource string in any of our
formats (spawn_formats) and adds it between steps (Session.spawn: topics, TF, description like a
model loaded at start); a URDF's root link floats (a free joint), as Gazebo spawns URDF robots.
entity_namespace (a ROS namespace, absolute or made so; NAMESPACE_INVALID when it is not one, or
is the simulator's or another spawned entity's) puts the model's sensor topics, robot_description
and a joint_states of its joints under it (Bridge.namespaces); TF frames stay the world names.

Simulation states: playing (the runner paces), paused, stopped (a reset to t = 0, then paused:
what a STOPPED request does; play or step leave it), quitting (the node shuts down).
"""
from __future__ import annotations

import os
import re
import tempfile

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
F = dict(SPAWNING=0, DELETING=1, ENTITY_BOUNDS_BOX=6, ENTITY_BOUNDS_CONVEX=7, ENTITY_CATEGORIES=8, SPAWNING_RESOURCE_STRING=9, ENTITY_STATE_GETTING=10,
         ENTITY_STATE_SETTING=11, ENTITY_INFO_GETTING=12, SPAWNABLES=14, SIMULATION_RESET=20,
         SIMULATION_RESET_TIME=21, SIMULATION_RESET_STATE=22, SIMULATION_RESET_SPAWNED=23,
         SIMULATION_STATE_GETTING=24, SIMULATION_STATE_SETTING=25, SIMULATION_STATE_PAUSE=26,
         STEP_SIMULATION_SINGLE=31, STEP_SIMULATION_MULTIPLE=32, STEP_SIMULATION_ACTION=33)

# simulation_interfaces/msg/TagsFilter and Bounds
TAGS_ANY, TAGS_ALL = 0, 1
BOUNDS_EMPTY, BOUNDS_BOX, BOUNDS_CONVEX_HULL, BOUNDS_SPHERE = 0, 1, 2, 3
BOUNDS_TOLERANCE = 1e-9                      # m: a point on the boundary is inside, despite rounding

# a spawned entity's name: one token of a ROS name (it makes NS/<name>/robot_description and the
# prefix of its frames); a namespace short enough that its topics stay within DDS's 255 characters
ENTITY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
MAX_NAME, MAX_NAMESPACE = 64, 160

# file extension -> the format name spawn_formats lists (a .xml is read by its root: <mujoco>,
# <robot> or <sdf>; MJCF is the one that has no other extension)
SPAWN_FORMATS = {".urdf": "urdf", ".wrl": "vrml", ".osim": "osim", ".yaml": "chrono_yaml", ".yml": "chrono_yaml",
                 ".sdf": "sdf", ".world": "sdf", ".xml": "mjcf"}


class SimulationInterfaces:
    """The services over `session` (run/session.py), whose topics `bridge` publishes. quit(): what STATE_QUITTING does (the node
    shuts down); None: quitting is refused. spawnable_dirs: folders whose model files
    GetSpawnables lists besides the bundled models."""

    def __init__(self, session, bridge, quit=None, spawnable_dirs=()):
        self.session = session
        self.bridge = bridge
        self.quit = quit
        self.stopped = False                 # reset and paused by a STOPPED request, not stepped since
        self.initial = list(session.sim.model_names)     # what ResetSimulation's SCOPE_SPAWNED keeps
        self.spawnable_dirs = list(spawnable_dirs)

    @property
    def sim(self):
        return self.session.sim

    def _physics(self, fn):
        """fn() in the physics thread between steps (Session.between_steps)."""
        return self.session.between_steps(fn)

    # -- features ----------------------------------------------------------------------------
    def can_spawn(self):
        return hasattr(self.sim, "add_model") and hasattr(self.session, "spawn")

    def can_delete(self):
        return hasattr(self.sim, "remove_model") and hasattr(self.session, "delete")

    def features(self):
        """(feature codes, spawn formats, custom info): exactly what this node does."""
        names = ["ENTITY_BOUNDS_BOX", "ENTITY_BOUNDS_CONVEX", "ENTITY_CATEGORIES", "ENTITY_STATE_GETTING", "ENTITY_STATE_SETTING", "ENTITY_INFO_GETTING",
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
            "ResetSimulation resets time and state together; entities have no tags (a tags filter "
            "with tags matches none); bounds filters test the entity's root origin")

    # -- simulation state --------------------------------------------------------------------
    def state(self):
        if self.stopped:
            return STOPPED
        return PAUSED if self.session.paused else PLAYING

    def set_state(self, target):
        """(code, message) of a SetSimulationState request."""
        current = self.state()
        if target == current:
            return ALREADY_IN_TARGET_STATE, f"already in state {target}"
        if target == PLAYING:
            self.stopped = False
            self.session.resume()
            return OK, "playing"
        if target == PAUSED:
            if current == STOPPED:
                return INCORRECT_TRANSITION, "the simulation is stopped: play it (or step it) first"
            if not self.session.pause(wait=True, timeout=10.0):
                return STATE_TRANSITION_ERROR, "the simulation did not pause within 10 s"
            return OK, "paused"
        if target == STOPPED:
            if not self.session.pause(wait=True, timeout=10.0):
                return STATE_TRANSITION_ERROR, "the simulation did not pause within 10 s"
            self._reset()
            self.stopped = True
            return OK, "stopped: reset to t = 0 and paused"
        if target == QUITTING:
            if self.quit is None:
                return FEATURE_UNSUPPORTED, "quitting is not offered here"
            self.session.pause()
            self.quit()
            return OK, "quitting"
        return FEATURE_UNSUPPORTED, f"state {target}: expected 0 (stopped), 1 (playing), 2 (paused) or 3 (quitting)"

    # -- stepping -------------------------------------------------------------------------------
    def step(self, steps, feedback=None, cancelled=None, chunk=None):
        """(code, message) of StepSimulation / SimulateSteps: `steps` steps from a paused state,
        then paused again. feedback(completed, remaining) after each chunk of steps (default: one
        step with feedback, as SimulateSteps gives it after each step; all at once without);
        cancelled() checked between chunks (then OPERATION_FAILED)."""
        steps = int(steps)
        if self.state() == PLAYING:
            return OPERATION_FAILED, "the simulation is playing: pause it first (SetSimulationState)"
        if steps < 1:
            return OPERATION_FAILED, f"steps must be >= 1, got {steps}"
        self.stopped = False
        chunk = chunk or (1 if feedback is not None or cancelled is not None else steps)
        done = 0
        while done < steps:
            if cancelled is not None and cancelled():
                return OPERATION_FAILED, f"cancelled after {done} of {steps} steps"
            n = min(chunk, steps - done)
            if not self.session.step(n, wait=True, timeout=max(10.0, 0.05 * n)):
                return OPERATION_FAILED, f"the simulation did not take {n} steps (after {done} of {steps})"
            done += n
            if feedback is not None:
                feedback(done, steps - done)
        return OK, f"t = {self.sim.t:.6f} s"

    # -- reset --------------------------------------------------------------------------------
    def _reset(self):
        """Time and state to the start (Session.reset, in the physics thread), and wait for it."""
        self.session.reset()
        self._physics(lambda: None)

    def reset(self, scope):
        """(code, message) of ResetSimulation. Time and state are reset together (the one reset
        the Simulation has): a scope with one of them and not the other is unsupported."""
        scope = SCOPE_ALL if scope == SCOPE_DEFAULT else int(scope)
        if scope != SCOPE_ALL and scope & ~(SCOPE_TIME | SCOPE_STATE | SCOPE_SPAWNED):
            return FEATURE_UNSUPPORTED, (f"scope {scope}: expected SCOPE_DEFAULT (0), SCOPE_ALL (255) or a sum of "
                                         "SCOPE_TIME (1), SCOPE_STATE (2), SCOPE_SPAWNED (4)")
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
        return self.sim.model_names

    @staticmethod
    def category(model):
        """STATIC_OBJECT without degrees of freedom; ROBOT with a moving joint below its root;
        OBJECT otherwise (a free body)."""
        if model.nv == 0:
            return CATEGORY_STATIC_OBJECT
        if any(j.parent is not None and j.type != "fixed" for j in model.joints):
            return CATEGORY_ROBOT
        return CATEGORY_OBJECT

    def entities(self, pattern="", categories=(), tags=(), tags_mode=TAGS_ANY, bounds_type=BOUNDS_EMPTY,
                 bounds_points=()):
        """(code, message, names) of GetEntities: names matching the regular expression `pattern`
        (searched), of any of `categories`, passing the tags and bounds filters (EntityFilters).
        Tags: entities have no tags here, so a filter without tags passes every entity and one
        with tags (any mode: ANY needs one of them, ALL needs all) passes none.
        Bounds (world coordinates): an entity passes when its root link's origin lies inside the
        box (two opposite corners), the sphere (center, radius in the second point's x) or the
        convex hull of the points (3 or more not on one line; a flat hull is a polygon) (inclusive,
        to 1e-9 m); its geometry is not considered."""
        if tags_mode not in (TAGS_ANY, TAGS_ALL):
            return OPERATION_FAILED, f"tags filter_mode {tags_mode}: expected 0 (any) or 1 (all)", []
        inside = bounds_test(bounds_type, bounds_points)
        if isinstance(inside, tuple):
            return inside + ([],)
        try:
            rx = re.compile(pattern or "")
        except re.error as e:
            return OPERATION_FAILED, f"filter {_short(pattern)} is not a regular expression: {e}", []
        models = {n: self._model(n) for n in self.sim.model_names if rx.search(n)}
        names = [n for n, m in models.items() if m is not None
                 and (not categories or self.category(m) in categories)
                 and not tags]                  # no entity has a tag: a filter with tags passes none
        if inside is not None and names:
            def origins():          # those deleted meanwhile left out
                return {n: self.sim.link_pose(self._link(n))[:3, 3].copy() for n in names if n in self.sim.model_names}
            roots = self._physics(origins)
            names = [n for n in names if n in roots and inside(roots[n])]
        return OK, "", names

    def entity_info(self, name):
        """(code, message, (category, description, tags))."""
        model = self._model(name)
        if model is None:
            return NOT_FOUND, self._unknown(name), None
        joints = sum(1 for j in model.joints if j.type != "fixed")
        return OK, "", (self.category(model), f"{model.name}: {len(model.links)} links, {joints} moving joints", [])

    def _model(self, name):
        """The Model of entity `name`, or None: none has the name, or another service thread
        deleted it meanwhile (spawn and delete run beside the readers)."""
        try:
            return self.sim.model(name)
        except (KeyError, ValueError):
            return None

    def _unknown(self, name):
        return f"no entity {_short(name)}; entities: {', '.join(self.entity_names())}"

    def _link(self, name):
        """The qualified name "<model>/<link>" of "<model>" (its root link) or "<model>/<link>";
        KeyError. Qualified, as a world name (a bare "base") may be another model's bare name too."""
        model = self._model(name)
        if model is not None:
            return name + "/" + model.root_links[0]
        if "/" not in name:
            raise KeyError(name)
        entity, bare = self.sim.names.resolve("link", name)
        return entity + "/" + bare

    def _kinematics(self, link):
        """(T 4x4, twist 6, acceleration 6) of a link in the world (physics thread)."""
        sim = self.sim
        return sim.link_pose(link), sim.link_twist(link), sim.link_acceleration(link)

    def _frame_kinematics(self, frame):
        """(T, twist, acceleration) of a reference frame name in the world: "" or "world", or an
        entity ("<model>": its root link; "<model>/<link>") (physics thread); KeyError."""
        if frame in ("", "world"):
            return np.eye(4), np.zeros(6), np.zeros(6)
        return self._kinematics(self._link(frame))

    def entity_state(self, name, frame="world"):
        """(code, message, state) of GetEntityState; state: dict(stamp, frame, position,
        orientation (x, y, z, w), linear, angular, linear_acceleration, angular_acceleration),
        in the world, or relative to `frame` (another entity, as SetEntityState takes it): the
        pose in the frame, the velocity and acceleration of the link's origin as seen from the
        moving frame and expressed in its axes (the inverse of what SetEntityState composes):
        with r = p - p_f, v_rel = R_f^T (v - v_f - w_f x r), w_rel = R_f^T (w - w_f),
        a_rel = R_f^T (a - a_f - alpha_f x r - w_f x (w_f x r) - 2 w_f x R_f v_rel),
        alpha_rel = R_f^T (alpha - alpha_f - w_f x w). (The standard's GetEntityState request
        carries no frame: the node's service answers in the world.)"""
        try:
            link = self._link(name)
        except KeyError:
            return NOT_FOUND, self._unknown(name), None

        def read():
            return self._kinematics(link), self._frame_kinematics(frame), self.sim.t
        try:
            (T, twist, acc), (T_f, twist_f, acc_f), t = self._physics(read)
        except KeyError:
            return NOT_FOUND, f"reference frame {frame!r}: " + self._unknown(frame), None
        R_f, v_f, w_f, a_f, al_f = T_f[:3, :3], twist_f[:3], twist_f[3:], acc_f[:3], acc_f[3:]
        r = T[:3, 3] - T_f[:3, 3]
        v_seen = twist[:3] - v_f - np.cross(w_f, r)                     # world axes
        a_seen = (acc[:3] - a_f - np.cross(al_f, r) - np.cross(w_f, np.cross(w_f, r)) - 2 * np.cross(w_f, v_seen))
        T_rel = inverse_transform(T_f) @ T
        return OK, "", dict(stamp=t, frame=frame or "world", position=T_rel[:3, 3].copy(),
                            orientation=matrix_to_quat(T_rel[:3, :3]), linear=R_f.T @ v_seen,
                            angular=R_f.T @ (twist[3:] - w_f), linear_acceleration=R_f.T @ a_seen,
                            angular_acceleration=R_f.T @ (acc[3:] - al_f - np.cross(w_f, twist[3:])))

    def entities_states(self, pattern="", categories=(), tags=(), tags_mode=TAGS_ANY, bounds_type=BOUNDS_EMPTY,
                        bounds_points=()):
        code, message, names = self.entities(pattern, categories, tags, tags_mode, bounds_type, bounds_points)
        if code != OK:
            return code, message, [], []
        states = {n: self.entity_state(n)[2] for n in names}
        names = [n for n in names if states[n] is not None]       # deleted meanwhile
        return OK, "", names, [states[n] for n in names]

    def _frame(self, frame):
        """(T, twist) of a reference frame name in the world (physics thread); KeyError."""
        return self._frame_kinematics(frame)[:2]

    def set_entity_state(self, name, frame, position, orientation, linear, angular):
        """(code, message) of SetEntityState: the pose and twist of the model's root link,
        relative to `frame`. A free root is teleported (Simulation.set_root_pose, set_root_twist);
        another model is moved rigidly (Session.set_model_pose), which takes no twist."""
        if "/" in name:
            return OPERATION_FAILED, f"{name!r}: only a model's root can be set (give the model's name)"
        model = self._model(name)
        if model is None:
            return NOT_FOUND, self._unknown(name)
        twist = np.concatenate([np.asarray(linear, float), np.asarray(angular, float)])
        quat, pos = np.asarray(orientation, float), np.asarray(position, float)
        norm = float(np.linalg.norm(quat))
        if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(quat)) and abs(norm - 1.0) < 1e-3):
            return SET_INVALID_POSE, (f"pose of {name!r}: a finite position and a unit quaternion (x, y, z, w) "
                                      f"expected, got {pos.tolist()} and {quat.tolist()} (norm {norm:.6g})")
        if not np.all(np.isfinite(twist)):
            return OPERATION_FAILED, f"twist of {name!r} must be finite, got {twist.tolist()}"
        roots = [j for j in model.joints if j.parent is None]
        free = len(roots) == 1 and roots[0].type == "free"
        if not free and np.any(twist != 0):
            return OPERATION_FAILED, (f"{name!r} has no free root joint: it can be moved (a pose) but not "
                                      "given a twist")

        def reference():
            T_ref, twist_ref = self._frame(frame)
            T_link = T_ref @ make_transform(quat_to_matrix(quat / norm), pos)
            R_ref = T_ref[:3, :3]
            w = twist_ref[3:] + R_ref @ twist[3:]
            v = twist_ref[:3] + np.cross(twist_ref[3:], T_link[:3, 3] - T_ref[:3, 3]) + R_ref @ twist[:3]
            return T_link, np.concatenate([v, w])
        try:
            T_link, world_twist = self._physics(reference)
        except KeyError:
            return NOT_FOUND, f"reference frame {frame!r}: " + self._unknown(frame)
        try:
            if free:
                def teleport():
                    self.sim.set_root_pose(name, T_link)
                    self.sim.set_root_twist(name, world_twist)
                self._physics(teleport)
            else:
                # the model's world frame moves so that its root link lands at T_link
                T_root = self._physics(lambda: self.sim.link_pose(self._link(name)))
                placement = self.sim.model_pose(name)
                self.session.set_model_pose(name, T_link @ inverse_transform(T_root) @ placement)
        except ValueError as e:
            return OPERATION_FAILED, str(e)
        return OK, ""

    # -- spawning -----------------------------------------------------------------------------
    def spawnables(self):
        """(code, message, [(uri, description)]): the model files in the bundled models folder and
        the configured folders."""
        if not self.can_spawn():
            return FEATURE_UNSUPPORTED, "this simulation cannot add models", []
        from ..run.world import DATA
        out = []
        for folder in [DATA] + self.spawnable_dirs:
            for entry in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
                path = os.path.join(folder, entry)
                kind = spawn_format(path)
                if kind is not None:
                    out.append(("file://" + os.path.abspath(path), f"{kind} model"))
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
        if ext not in SPAWN_FORMATS:
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
            from ..run.config import valid_namespace
            taken = {self.bridge.ns, *self.session.namespaces.values()}
            if len(namespace) > MAX_NAMESPACE or not valid_namespace(namespace):
                return NAMESPACE_INVALID, (f"entity_namespace {_short(namespace)} is not a ROS namespace: tokens of "
                                           "letters, digits and _ (not starting with a digit) separated by '/', "
                                           f"at most {MAX_NAMESPACE} characters"), ""
            if "/" + namespace.strip("/") in taken:
                return NAMESPACE_INVALID, (f"entity_namespace {namespace!r} is in use (by the simulator or another "
                                           "spawned entity): its topics would clash"), ""
        if name and not ENTITY_NAME.fullmatch(name):
            return NAME_INVALID, (f"name {_short(name)}: letters, digits and _ (not starting with a digit), at most "
                                  f"{MAX_NAME} characters expected (it names the entity's topics and frames)"), ""
        quat, pos = np.asarray(orientation, float), np.asarray(position, float)
        norm = float(np.linalg.norm(quat))
        if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(quat)) and abs(norm - 1.0) < 1e-3):
            return INVALID_POSE, f"initial_pose: a unit quaternion (x, y, z, w) expected, got {quat.tolist()}", ""
        model, code, message = self._load(uri, resource_string)
        if model is None:
            return code, message, ""
        name = name or topic_token(model.name)
        if name in self.entity_names() and not allow_renaming:
            return NAME_NOT_UNIQUE, f"an entity named {name!r} exists (allow_renaming is false)", ""
        try:
            T_ref = self._physics(lambda: self._frame(frame)[0])
        except KeyError:
            return INVALID_POSE, f"initial_pose frame {frame!r}: " + self._unknown(frame), ""
        T = T_ref @ make_transform(quat_to_matrix(quat / norm), pos)
        try:
            # renamed in the physics thread: a concurrent spawn cannot take the same name
            spawned = self.session.spawn(model, name=name, pose=T, namespace=namespace or None,
                                         rename=bool(allow_renaming))
        except (ModelError, ValueError) as e:
            if name in self.entity_names() and not allow_renaming:      # taken meanwhile
                return NAME_NOT_UNIQUE, f"an entity named {name!r} exists (allow_renaming is false)", ""
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
        except KeyError:                  # deleted by another request meanwhile
            return NOT_FOUND, self._unknown(name)
        except ValueError as e:
            return OPERATION_FAILED, str(e)
        return OK, ""


def _short(text, limit=80):
    """repr(text), cut to `limit` characters with its length said (a huge name in a message)."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def topic_token(name):
    """A model file's own name made an entity name (a file's name is not ours to refuse):
    characters other than letters, digits and _ become _, a leading digit gets a _ before it,
    cut to MAX_NAME."""
    token = re.sub(r"[^A-Za-z0-9_]", "_", str(name)) or "model"
    if token[0].isdigit():
        token = "_" + token
    return token[:MAX_NAME]


def bounds_test(kind, points):
    """inside(p) -> bool for a Bounds message's type and points (world coordinates), None for
    TYPE_EMPTY (no bounds filter), or (code, message) for bounds that define no region."""
    pts = np.asarray(points, float).reshape(-1, 3)
    tol = BOUNDS_TOLERANCE
    if not np.all(np.isfinite(pts)):
        return OPERATION_FAILED, f"bounds points must be finite, got {pts.tolist()}"
    if kind == BOUNDS_EMPTY:
        if len(pts):
            return OPERATION_FAILED, f"bounds TYPE_EMPTY takes no points, got {len(pts)}"
        return None
    if kind == BOUNDS_BOX:
        if len(pts) != 2:
            return OPERATION_FAILED, f"bounds TYPE_BOX: two opposite corners expected, got {len(pts)} points"
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        return lambda p: bool(np.all(p >= lo - tol) and np.all(p <= hi + tol))
    if kind == BOUNDS_SPHERE:
        if len(pts) != 2 or pts[1, 0] < 0:
            return OPERATION_FAILED, ("bounds TYPE_SPHERE: the center and a point whose x is the radius (>= 0) "
                                      f"expected, got {pts.tolist()}")
        center, radius = pts[0], pts[1, 0]
        return lambda p: bool(np.linalg.norm(p - center) <= radius + tol)
    if kind == BOUNDS_CONVEX_HULL:
        if len(pts) < 3 or np.linalg.matrix_rank(pts[1:] - pts[0], tol=1e-12) < 2:
            return OPERATION_FAILED, ("bounds TYPE_CONVEX_HULL: at least 3 points not on one line expected, "
                                      f"got {pts.tolist()}")
        planes = hull_planes(pts)
        return lambda p: bool(np.all(planes[:, :3] @ p <= planes[:, 3] + tol))
    return OPERATION_FAILED, f"bounds type {kind}: expected 0 (empty), 1 (box), 2 (convex hull) or 3 (sphere)"


def hull_planes(pts):
    """(n, 4) rows (unit outward normal, offset) of half-spaces whose intersection is the convex
    hull of 3-D points not all on one line (qhull, so a request with thousands of points is
    answered at once): with a volume, the hull's facets; a flat hull is its plane (both sides)
    and its polygon's edges, each as the plane through it across the polygon."""
    from scipy.spatial import ConvexHull
    if np.linalg.matrix_rank(pts[1:] - pts[0], tol=1e-12) == 3:
        eq = ConvexHull(pts).equations                  # normal . p + offset <= 0 inside
        return np.column_stack([eq[:, :3], -eq[:, 3]])
    center = pts.mean(axis=0)
    u, v, normal = np.linalg.svd(pts - center)[2]        # the plane's axes and its normal
    flat = np.column_stack([(pts - center) @ u, (pts - center) @ v])
    eq = ConvexHull(flat).equations                     # a x + b y + offset <= 0 inside
    edges = eq[:, :1] * u + eq[:, 1:2] * v
    return np.vstack([np.append(normal, normal @ center), np.append(-normal, -normal @ center),
                      np.column_stack([edges, edges @ center - eq[:, 2]])])


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


def spawn_format(path):
    """The format name (SPAWN_FORMATS) of the model file at `path`, a .xml by its root; None
    for a file that is none of them."""
    ext = os.path.splitext(path)[1].lower()
    if ext != ".xml":
        return SPAWN_FORMATS.get(ext)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            suffix = guess_suffix(f.read(4096))
    except OSError:
        return None
    return {".xml": "mjcf", ".urdf": "urdf", ".sdf": "sdf"}.get(suffix)


def guess_suffix(text):
    """The file extension of a model given as text, by its content."""
    from ..formats.mjcf import is_mjcf
    head = text.lstrip()[:4096]
    if head.startswith("#VRML"):
        return ".wrl"
    if is_mjcf(head.encode("utf-8", "replace")):      # by its root: a URDF's <mujoco> extension is no MJCF
        return ".xml"
    if "<robot" in head:
        return ".urdf"
    if "<sdf" in head:
        return ".sdf"
    if "<OpenSimDocument" in head:
        return ".osim"
    if head and not head.startswith("<"):
        return ".yaml"
    return None

