"""The Simulation users get: the dynamics Simulation plus the models' simulated sensors.

    sim = mb.Simulation(model, dt=0.001, seed=0, sensors={"WaistGyro": {"rate": 500}})
    sim.step(100)
    sim.readings()   # {sensor name: Reading(stamp, frame, values, saturated)}

step(n) runs the dynamics in chunks that end exactly at the steps where a device samples
(one numba call per chunk), so sensors never slow down stretches where none is due.
"""
import numpy as np

from .. import dynamics
from ..dynamics import kernels
from ..dynamics.constraints import STAT_NCON
from .devices import KINEMATIC, Device, SensorConfigError
from .kinematic import ACCELEROMETER, FORCE, GYRO, sense_kernel

KIND_CODES = {"accelerometer": ACCELEROMETER, "gyro": GYRO, "force": FORCE}


class Simulation(dynamics.Simulation):
    """dynamics.Simulation (see there for dt, integrator, contact and solver options) with the
    models' sensors simulated. seed: the world noise seed (each device adds a hash of its name).
    sensors: {sensor name: {rate, delay, saturate, noise, enabled, points}}; a name that is not a
    sensor of the models is a SensorConfigError. Readings appear once their device has sampled."""

    def __init__(self, models, dt: float = 0.001, integrator: str = "semi-implicit-euler",
                 contact=None, max_contacts: int = 64, seed: int = 0, sensors=None, **solver_options):
        self.devices = {}
        super().__init__(models, dt, integrator, contact, max_contacts, **solver_options)
        self.seed = int(seed)
        config = dict(sensors or {})
        owners = {}
        for model in self.models:
            for s in model.sensors:
                if s.name in owners:
                    raise SensorConfigError(f"sensor name {s.name!r} appears in models {owners[s.name].name!r} and "
                                            f"{model.name!r}: sensor names must be unique in a world (they name topics)")
                owners[s.name] = model
        unknown = sorted(set(config) - set(owners))
        if unknown:
            raise SensorConfigError(f"sensors: unknown sensor(s) {', '.join(unknown)}; the models have "
                                    f"{', '.join(sorted(owners)) or 'no sensors'}")
        for model in self.models:
            for s in model.sensors:
                cfg = config.get(s.name) or {}
                if not isinstance(cfg, dict):
                    raise SensorConfigError(f"sensors.{s.name}: expected a mapping, got {cfg!r}")
                self.devices[s.name] = Device(s, model, cfg, self.seed, self.dt)
        self._setup_kinematic()
        self._scene = None
        self._sense_df, self._sense_data = self.compiled.new_data()
        self._pose_df, self._pose_data = self.compiled.new_data()
        self.warm_up()

    def _warm_up_jobs(self):
        """The dynamics' kernels, then those of the sensors the world has: sensing, and rendering
        and ray casting only with cameras and range sensors."""
        jobs = super()._warm_up_jobs()
        kinds = {d.kind for d in self.devices.values() if d.enabled}
        if kinds & set(KINEMATIC):
            jobs.append(("sensors", self._sense_kinematic))
        if "camera" in kinds:
            jobs.append(("camera rendering", self._warm_up_render))
        if "range" in kinds:
            jobs.append(("range ray casting", self._warm_up_cast))
        return jobs

    def _warm_up_render(self):
        from ..render import render
        render(self.scene, np.eye(4), 2, 2, 1.0, 0.1, 10.0)

    def _warm_up_cast(self):
        from ..render import cast_rays
        cast_rays(self.scene, np.zeros((1, 3)), np.array([[0.0, 0.0, 1.0]]), 1.0)

    # -- setup ------------------------------------------------------------------------------
    def _link_index(self, device):
        try:
            return self.compiled.link_names.index(device.link)
        except ValueError:
            raise SensorConfigError(f"sensor {device.name!r}: its link {device.link!r} is not in the model") from None

    def _setup_kinematic(self):
        """Arrays for sense_kernel: each accelerometer/gyro/force sensor's body and its frame there."""
        tree = self.compiled.tree
        kin = [d for d in self.devices.values() if d.kind in KINEMATIC]
        n = len(kin)
        self._kin = kin
        self._kin_slot = {d.name: k for k, d in enumerate(kin)}
        self._kin_kind = np.array([KIND_CODES[d.kind] for d in kin], dtype=np.int64)
        self._kin_body = np.zeros(n, dtype=np.int64)
        self._kin_R = np.zeros((n, 3, 3))
        self._kin_p = np.zeros((n, 3))
        self._kin_out = np.zeros((n, 6))
        self._tau_scratch = np.zeros(self.nv)
        for k, d in enumerate(kin):
            li = self._link_index(d)
            b = int(tree.link_body[li])
            if d.kind == "force":
                self._check_force_sensor(d, li, b)
            pose = d.sensor.pose
            self._kin_body[k] = b
            self._kin_R[k] = tree.link_R[li] @ pose[:3, :3]
            self._kin_p[k] = tree.link_R[li] @ pose[:3, 3] + tree.link_p[li]

    def _check_force_sensor(self, device, link_index, body):
        """A force sensor reads its joint's reaction: it needs a moving joint of its own, and no
        loop closure may cross its subtree (loop forces are not among the sensed external forces)."""
        tree, names = self.compiled.tree, self.compiled.link_names
        model = device.model
        joint = next((j for j in model.joints if j.child == device.link), None)
        if body < 0 or joint is None or joint.type == "fixed":
            raise SensorConfigError(
                f"force sensor {device.name!r}: link {device.link!r} is welded to its parent; a force sensor "
                "measures a moving joint's reaction, so mount it on the child link of a non-fixed joint")
        below = np.zeros(len(tree.parent), dtype=bool)
        below[body] = True
        for i in range(body + 1, len(tree.parent)):      # bodies are in depth-first order
            if tree.parent[i] >= 0 and below[tree.parent[i]]:
                below[i] = True
        def inside(link):      # None: the world, outside every subtree
            return link is not None and tree.link_body[names.index(link)] >= 0 and below[tree.link_body[names.index(link)]]
        crossing = [(f"loop closure {loop.name!r}", loop.link1, loop.link2) for loop in model.constraints]
        # force elements whose constraint rows (motors, guides, spring stops) carry forces too
        crossing += [(f"{what} {name!r}", l1, l2) for what, name, l1, l2 in self.forces.constrained
                     if l1 is not None or l2 is not None]
        for what, l1, l2 in crossing:
            if inside(l1) != inside(l2):
                raise SensorConfigError(
                    f"force sensor {device.name!r}: {what} joins its subtree to the rest "
                    "of the model; force sensors across constraints are not supported")

    # -- stepping ---------------------------------------------------------------------------
    def reset(self):
        super().reset()
        for d in getattr(self, "devices", {}).values():
            d.reset()

    def step(self, n: int = 1):
        """Advance n steps of dt, sampling every device whose instant is reached."""
        active = [d for d in self.devices.values() if d.enabled]
        if n <= 0 or not active:
            return super().step(n)
        while n > 0:
            due = min(d.next_step for d in active)
            k = min(n, due - self._steps)
            super().step(k)
            n -= k
            if self._steps == due:
                self._sample([d for d in active if d.next_step == due])

    def _sample(self, devices):
        kin = [d for d in devices if d.kind in KINEMATIC]
        if kin:
            self._sense_kinematic()
            stamp = (self._steps - 1) * self.dt
            for d in kin:
                d.push(d.finish_kinematic(stamp, self._kin_out[self._kin_slot[d.name]]))
        optical = [d for d in devices if d.kind not in KINEMATIC]
        if optical:
            self._sense_optical(optical, self._steps * self.dt)

    def _sense_kinematic(self):
        """All accelerometers, gyros and force sensors at the last step's start state, with the
        step's acceleration and contact forces."""
        s, cw = self.constraints.solver, self._contacts
        ncon = int(s.stats[STAT_NCON])
        if self.options["contact_method"] == "lcp":
            ncon = min(ncon, self.constraints.max_contacts)
        elif self.options["contact_method"] == "none":
            ncon = 0
        sel = s.csel[:ncon]
        d = self._data
        self._evaluate(d.q_prev, d.v_prev, d.a_step, cw.link[sel], cw.point[sel], s.cforce[:ncon],
                       (self._steps - 1) * self.dt)

    def _evaluate(self, q, v, qdd, c_link, c_point, c_force, time):
        f = self.forces
        sense_kernel(self.compiled.tf, self.compiled.ti, self._sense_df, self._ef, f.ei, time, q, v, qdd, c_link,
                     c_point, c_force, self._kin_kind, self._kin_body, self._kin_R, self._kin_p,
                     self._tau_scratch, self._kin_out)

    def sense(self, q, v, qdd):
        """{name: values} of every accelerometer, gyro and force sensor at state (q, v) with
        acceleration qdd, the force elements at the current time and no contact forces: the
        ideal readings (no noise, delay or rate)."""
        from ..dynamics.api import as_vector
        self._evaluate(as_vector(q, self.nq, "q"), as_vector(v, self.nv, "v"), as_vector(qdd, self.nv, "qdd"),
                       np.zeros((0, 2), np.int64), np.zeros((0, 3)), np.zeros((0, 3)), self.t)
        return {d.name: self._kin_out[k, :3 if d.kind != "force" else 6].copy() for k, d in enumerate(self._kin)}

    @property
    def scene(self):
        """The render Scene of all models (built on first use), posed at the current state."""
        from ..render import Scene
        if self._scene is None:
            self._scene = Scene(self.models, self.compiled.link_names)
        c, d = self.compiled, self._pose_data
        kernels.kinematics_kernel(c.tf, c.ti, self._pose_df, self._q, self._v)
        self._scene.set_link_poses(d.link_R, d.link_p)
        return self._scene

    def _sense_optical(self, devices, stamp):
        from ..render import cast_rays, render, sensor_pose
        scene = self.scene                       # posed once at the current state
        for dev in devices:
            T = sensor_pose(scene, dev.sensor)
            if dev.kind == "range":
                n = len(dev.angles)
                origins = np.broadcast_to(T[:3, 3], (n, 3)).copy()
                dirs = dev.directions @ T[:3, :3].T
                out = np.empty(n)
                cast_rays(scene, origins, dirs, dev.range_max, out)
                dev.push(dev.finish_range(stamp, out))
            else:
                color = depth = None
                if dev.color:
                    color = np.empty((dev.height, dev.width) if dev.mono else (dev.height, dev.width, 3), np.uint8)
                if dev.depth:
                    depth = np.empty((dev.height, dev.width), np.float32)
                render(scene, T, dev.width, dev.height, dev.fov, dev.near, dev.far, color=color, depth=depth,
                       mono=dev.mono)
                dev.push(dev.finish_camera(stamp, color, depth))

    # -- readings ---------------------------------------------------------------------------
    def readings(self):
        """{sensor name: Reading}: each device's newest reading whose delay has passed."""
        out = {}
        t = self.t
        for name, d in self.devices.items():
            r = d.visible(t)
            if r is not None:
                out[name] = r
        return out
