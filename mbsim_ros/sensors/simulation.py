"""The Simulation users get: the dynamics' Physics plus the models' simulated sensors.

    sim = mb.Simulation(model, dt=0.001, seed=0, sensors={"WaistGyro": {"rate": 500}})
    sim.step(100)
    sim.readings()   # {sensor name: Reading(stamp, frame, values, saturated)}

step(n) runs the dynamics in chunks that end exactly at the steps where a device samples
(one kernel call per chunk), so sensors never slow down stretches where none is due.
"""
import numpy as np

from .. import dynamics
from ..dynamics import kernels
from ..dynamics.constraints import STAT_NCON
from ..dynamics.physics import POSES_ONLY
from .devices import KINEMATIC, Device, SensorConfigError
from .kinematic import ACCELEROMETER, FORCE, GYRO, sense_kernel

KIND_CODES = {"accelerometer": ACCELEROMETER, "gyro": GYRO, "force": FORCE}


class Simulation(dynamics.Physics):
    """dynamics.Physics (see there for dt, integrator, contact and solver options) with the
    models' sensors simulated. seed: the world noise seed (each device adds a hash of its name).
    sensors: {sensor name: {rate, delay, saturate, noise, enabled, points}}; a name that is not a
    sensor of the models is a SensorConfigError. Readings appear once their device has sampled."""

    def __init__(self, models, dt: float = 0.001, integrator: str = "semi-implicit-euler",
                 contact=None, max_contacts: int = 64, seed: int = 0, sensors=None, poses=None,
                 names=None, **solver_options):
        self.devices = {}
        self._optical = None             # OpticalWorker while rendering on a thread
        super().__init__(models, dt, integrator, contact, max_contacts, poses, names, **solver_options)
        self.seed = int(seed)
        config, unknown = {}, []
        for key, cfg in dict(sensors or {}).items():    # qualified or unambiguous bare names
            try:
                entity, bare = self.names.resolve("sensor", key)
            except KeyError as e:
                if " models; say which" in e.args[0]:
                    raise SensorConfigError(f"sensors: {e.args[0]}") from None
                unknown.append(str(key))
                continue
            config[self.names.world(entity, "sensor", bare)] = cfg
        if unknown:
            known = [self.names.world(e, "sensor", s.name) for e, m in zip(self.entities, self.models) for s in m.sensors]
            raise SensorConfigError(f"sensors: unknown sensor(s) {', '.join(sorted(unknown))}; the models have "
                                    f"{', '.join(sorted(known)) or 'no sensors'}")
        for entity, model in zip(self.entities, self.models):
            for s in model.sensors:
                name = self.names.world(entity, "sensor", s.name)
                cfg = config.get(name) or {}
                if not isinstance(cfg, dict):
                    raise SensorConfigError(f"sensors.{name}: expected a mapping, got {cfg!r}")
                self.devices[name] = self._device(entity, model, s, cfg)
        self._setup_sensing()

    def _device(self, entity, model, sensor, cfg):
        device = Device(sensor, model, cfg, self.seed, self.dt, name=self.names.world(entity, "sensor", sensor.name),
                        link=self.names.world(entity, "link", sensor.link))
        device.entity = entity
        return device

    def _setup_sensing(self):
        self._setup_kinematic()
        self._scene = None
        if self._optical is not None:    # a new world: the worker draws it from the next sample on
            from ..render import Scene
            self._optical.flush()
            self._optical.scene = Scene(self.models, self.compiled.link_names)
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

    def _world_changed(self, old_entities):
        """Keep the devices of the models that stay (schedules, queues, noise state); new
        models' sensors start sampling from now (default settings)."""
        devices = {}
        for entity, model in zip(self.entities, self.models):
            for s in model.sensors:
                name = self.names.world(entity, "sensor", s.name)
                if entity in old_entities and name in self.devices:
                    devices[name] = self.devices[name]
                else:
                    devices[name] = self._device(entity, model, s, {})
                    devices[name].start_at(self._steps)
        self.devices = devices
        self._setup_sensing()

    # -- setup ------------------------------------------------------------------------------
    def _link_index(self, device):
        return self.compiled.link_names.index(device.link)

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
        # the sense kernel's output; after a sample, each device's values (noise and saturation
        # applied), stamp and sample count (kinematic_samples)
        self._kin_out = np.zeros((n, 6))
        self._kin_stamp = np.zeros(n)
        self._kin_count = np.zeros(n, np.int64)
        self._kin_altered = {d.name for d in kin if d.saturate or d.noise.active}
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
        tree = self.compiled.tree
        model = device.model
        mi = self.entities.index(device.entity)
        joint = next((j for j in model.joints if j.child == device.sensor.link), None)
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
            if link is None:
                return False
            b = tree.link_body[self.compiled.link_index(mi, link)]
            return b >= 0 and below[b]
        crossing = [(f"loop closure {loop.name!r}", loop.link1, loop.link2) for loop in model.constraints]
        # force elements of this model whose constraint rows (motors, guides, spring stops) carry forces too
        crossing += [(f"{what} {name!r}", l1, l2) for what, name, l1, l2, m in self.forces.constrained
                     if m == mi and (l1 is not None or l2 is not None)]
        for what, l1, l2 in crossing:
            if inside(l1) != inside(l2):
                raise SensorConfigError(
                    f"force sensor {device.name!r}: {what} joins its subtree to the rest "
                    "of the model; force sensors across constraints are not supported")

    # -- stepping ---------------------------------------------------------------------------
    def reset(self):
        """As dynamics.Physics.reset, and every device back to t = 0."""
        super().reset()
        if getattr(self, "_optical", None) is not None:
            self._optical.flush()        # no frame of the old run may land after the reset
        for d in getattr(self, "devices", {}).values():
            d.reset()

    def step(self, n: int = 1):
        """Advance n steps of dt, sampling every device whose instant is reached."""
        if not self.devices:                 # no sensors: the world's step alone
            return dynamics.Physics.step(self, n)
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
            out, slots, altered = self._kin_out, self._kin_slot, self._kin_altered
            for d in kin:
                k = slots[d.name]
                r = d.finish_kinematic(stamp, out[k])
                if d.delay == 0:
                    d.show(r)            # visible at once: no queue
                else:
                    d.push(r)
                if d.name in altered:
                    out[k, :len(r.values)] = r.values
                self._kin_stamp[k] = stamp
                self._kin_count[k] += 1
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
        sense_kernel(self.compiled.buffers, self._sense_df, self._kernel_forces(), time, q, v, qdd, c_link,
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
    def kinematic_samples(self):
        """(slots, values, stamps, counts): every accelerometer's, gyro's and force sensor's
        newest sample in arrays written in place as it samples, for readers that take each
        sample without a Reading (a bag's Lane, ros/bag_lane.py). slots: {sensor name: row};
        values (n, 6): the readings after noise and saturation (3 used by accelerometers and
        gyros); stamps (n,): their stamps; counts (n,): samples taken so far. A world change
        (add_model, remove_model, set_model_pose) makes new arrays."""
        return self._kin_slot, self._kin_out, self._kin_stamp, self._kin_count

    @property
    def scene(self):
        """The render Scene of all models (built on first use), posed at the current state."""
        from ..render import Scene
        if self._scene is None:
            self._scene = Scene(self.models, self.compiled.link_names)
        c, d = self.compiled, self._pose_data
        kernels.kinematics_kernel(c.tf, c.ti, self._pose_df, self._q, POSES_ONLY)
        self._scene.set_link_poses(d.link_R, d.link_p)
        return self._scene

    def render_in_thread(self, on: bool = True):
        """Render cameras and range sensors on a worker thread from snapshots of the link poses
        (sensors/optical.py: the step never waits for a frame; a frame appears when done, a
        sample due while the device's previous one renders is skipped and counted), or inline
        again (on=False, after the queued frames are done)."""
        from .optical import OpticalWorker
        if on and self._optical is None:
            from ..render import Scene
            self._optical = OpticalWorker(Scene(self.models, self.compiled.link_names))
        elif not on and self._optical is not None:
            self._optical.close()
            self._optical = None

    @property
    def optical_worker(self):
        """The OpticalWorker while rendering on a thread, else None."""
        return self._optical

    def _sense_optical(self, devices, stamp):
        from .optical import sense_optical
        if self._optical is not None:
            R, p = self.link_poses()
            for dev in devices:
                if not self._optical.submit(dev, stamp, R, p):
                    dev.skip(stamp)      # the schedule moves on all the same
            return
        scene = self.scene                       # posed once at the current state
        for dev in devices:
            dev.push(sense_optical(scene, dev, stamp))

    # -- readings ---------------------------------------------------------------------------
    def readings(self):
        """{sensor name: Reading}: each device's newest reading whose delay has passed."""
        out = {}
        t = self.t
        for name, d in self.devices.items():
            r = d.visible(t) if d.pending else d.latest      # (most have nothing pending: no call)
            if r is not None:
                out[name] = r
        return out
