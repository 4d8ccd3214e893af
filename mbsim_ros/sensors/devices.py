"""Simulated devices: the models' sensors with their rates, delays, saturation and noise.

Every device samples on its own grid of instants k / rate (rate: frameRate for cameras,
scanRate for range sensors, `rate` from the config for the others: 1 kHz by default, never
faster than the physics). A sample is taken after the step that reaches its instant:
  accelerometer, gyro, force   read the state at the START of that step with the acceleration
                               the step applied (sensors/kinematic.py): the one instant at which
                               the dynamics hold exactly; stamp = that instant
  range, camera                see the configuration at the END of the step; stamp = sim time
A reading becomes visible in readings() `delay` seconds after its stamp, and keeps its stamp
(the acquisition time, as ROS wants it). Saturation (optional) clips at the model's max*
fields where they are given (> 0) and marks the reading.
"""
import math
from collections import deque, namedtuple
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import ConfigError, ModelError
from .noise import Noise, NoiseProcess, device_rng
from .optical import FramePool

KINEMATIC = ("accelerometer", "gyro", "force")
VISION_MODES = ("COLOR", "DEPTH", "COLOR_DEPTH", "MONO", "MONO_DEPTH", "NONE")
DEFAULT_RATE = 1000.0          # Hz, accelerometers, gyros and force sensors
CHANNELS = {"accelerometer": 3, "gyro": 3, "force": 6}
SHOWN = 8                      # readings a device keeps for the publisher (> frames in flight on a render thread)
COMMON_KEYS = {"rate", "delay", "saturate", "noise", "enabled"}
CAMERA_KEYS = COMMON_KEYS | {"points"}

Images = namedtuple("Images", ["color", "depth"])
Images.__doc__ = ("A camera frame: color (H, W, 3) uint8 RGB, or (H, W) uint8 for MONO modes, or None; "
                  "depth (H, W) float32 metres along the optical axis (+inf: nothing within the far clip), or None.")


@dataclass(frozen=True, eq=False)
class Reading:
    """One measurement: `stamp` (simulation time of acquisition, s), `frame` (the frame the values
    are in), `values` ((ax, ay, az) m/s^2; (wx, wy, wz) rad/s; (fx, fy, fz, tx, ty, tz) N, N m;
    ranges m, ring by ring (rings * columns, bottom ring first); Images for a camera),
    `saturated` (a value was clipped at its max* field)."""
    stamp: float
    frame: str
    values: Any
    saturated: bool = False
    intensities: Any = None        # range sensors: per ray, the laser_retro of what it hit (0: nothing)


class Arrivals:
    """Set (new = True) whenever a device sharing it gets a reading or is reset, from any thread;
    cleared by the one who then looks at them all (the bridge, once a step, shares one among the
    devices it collects): a step where nothing arrived and nothing pending came due needs no
    look at each device."""
    __slots__ = ("new",)

    def __init__(self):
        self.new = True


class SensorConfigError(ConfigError):
    """The sensor configuration names an unknown sensor or holds a bad value."""


def _angles(explicit, angle, step, where, allow_flat=False):
    """(angles, increment): `explicit` (samples, min, max) evenly from min to max, else OpenHRP's
    symmetric set 2 floor(angle / 2 / step) + 1 about 0 (one angle, 0, when allow_flat and
    angle or step is 0)."""
    if explicit is not None:
        samples, lo, hi = int(explicit[0]), float(explicit[1]), float(explicit[2])
        if samples < 1 or not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            raise SensorConfigError(f"{where}: samples >= 1 and min <= max expected, got {samples}, {lo}, {hi}")
        inc = (hi - lo) / (samples - 1) if samples > 1 else 0.0
        return (np.linspace(lo, hi, samples) if samples > 1 else np.array([lo])), inc
    angle, step = float(angle), float(step)
    if allow_flat and (angle <= 0 or step <= 0):
        return np.zeros(1), 0.0
    if not (step > 0 and angle >= 0):
        raise SensorConfigError(f"{where}: step must be > 0 and angle >= 0, got {step}, {angle}")
    half = int(math.floor(angle / 2.0 / step + 1e-9))
    return (np.arange(2 * half + 1) - half) * step, step


def _number(value, where, low=None, positive=False):
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise SensorConfigError(f"{where}: expected a number, got {value!r}") from None
    if not math.isfinite(x) or (positive and x <= 0) or (low is not None and x < low):
        bound = " > 0" if positive else f" >= {low}" if low is not None else ""
        raise SensorConfigError(f"{where}: expected a finite number{bound}, got {value!r}")
    return x


class Device:
    """One simulated sensor. Public attributes are what the ROS layer needs for its messages:
    name, kind, link, frame, rate (Hz), delay (s), variance (per channel: the white noise
    stddev^2), and per kind the geometry below."""

    def __init__(self, sensor, model, config, seed, dt, name=None, link=None):
        self.sensor = sensor
        self.name = sensor.name if name is None else name      # its world name (model/names.py)
        self.kind = sensor.type
        self.link = sensor.link if link is None else link      # its link's world name
        self.model = model
        self.arrivals = Arrivals()     # its own until a reader shares one among several
        where = f"sensors.{self.name}"
        allowed = CAMERA_KEYS if self.kind == "camera" else COMMON_KEYS
        unknown = sorted(set(config) - allowed)
        if unknown:
            raise SensorConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(allowed))}")
        p = sensor.params
        default = {"camera": p.get("frameRate", 30.0), "range": p.get("scanRate", 10.0)}.get(
            self.kind, p.get("updateRate", DEFAULT_RATE))
        self.rate = _number(config.get("rate", default), f"{where}.rate", positive=True)
        self.rate = min(self.rate, 1.0 / dt)       # never faster than the physics
        self.period = 1.0 / self.rate
        self.delay = _number(config.get("delay", 0.0), f"{where}.delay", low=0.0)
        self.saturate = bool(config.get("saturate", False))
        self.enabled = bool(config.get("enabled", True))
        self.idle = False          # lazy publishing: nobody wants the readings now (set_idle)
        self.seed = seed
        self.dt = dt
        self.lag_steps = 1 if self.kind in KINEMATIC else 0
        self.frame = self.name
        self.limits = None
        noise = config.get("noise", sensor.params.get("noise"))   # the model file's noise unless configured
        if self.kind in KINEMATIC:
            self._init_kinematic(noise, where)
        elif self.kind == "range":
            self._init_range(noise, where)
        elif self.kind == "camera":
            self._init_camera(config, where)
        else:
            raise SensorConfigError(f"{where}: sensor type {self.kind!r} is not simulated")
        self.reset()

    # -- per kind ---------------------------------------------------------------------------
    def _noise_blocks(self, value, n, where):
        """One Noise for every channel, or a list with one per channel."""
        try:
            if isinstance(value, (list, tuple)):
                if len(value) != n:
                    raise SensorConfigError(f"{where}: {len(value)} noise blocks for {n} channels")
                return [Noise.from_config(v, f"{where}[{k}]") for k, v in enumerate(value)]
            return [Noise.from_config(value, where)] * n
        except ModelError as e:
            raise SensorConfigError(str(e)) from None

    def _init_kinematic(self, noise, where):
        n = CHANNELS[self.kind]
        self.noise_blocks = self._noise_blocks(noise, n, f"{where}.noise")
        p = self.sensor.params
        keys = {"accelerometer": ["maxAcceleration"], "gyro": ["maxAngularVelocity"],
                "force": ["maxForce", "maxTorque"]}[self.kind]
        lim = np.concatenate([np.broadcast_to(np.asarray(p.get(k, -1.0), float), (3,)) for k in keys])
        self.limits = np.where(lim > 0, lim, np.inf)

    def _init_range(self, noise, where):
        """The ray set: yaw angles (columns) and pitch angles (rings, bottom first). OpenHRP's
        symmetric set from scanAngle/scanStep, or `horizontal` (samples, min, max) as SDFormat
        gives it; rings from `vertical` (samples, min, max) or Choreonoid's pitchRange/pitchStep
        (symmetric about 0), else one ring at pitch 0."""
        from ..render import lidar_directions
        p = self.sensor.params
        yaw, step = _angles(p.get("horizontal"), p.get("scanAngle", math.pi), p.get("scanStep", 0.1),
                            f"{where}: horizontal scan")
        pitch, _ = _angles(p.get("vertical"), p.get("pitchRange", 0.0), p.get("pitchStep", 0.0),
                           f"{where}: vertical scan", allow_flat=True)
        self.angles = yaw                                  # counter-clockwise about the laser frame's z
        self.pitches = pitch                               # up from the laser frame's xy plane
        self.rings, self.columns = len(pitch), len(yaw)
        self.scan_ring = int(np.argmin(np.abs(pitch)))     # the ring a LaserScan carries
        self.directions = lidar_directions(yaw, pitch)     # in the sensor's own frame
        th, ph = np.meshgrid(yaw, pitch)                   # the same rays in the laser frame
        self.laser_directions = np.stack([np.cos(ph) * np.cos(th), np.cos(ph) * np.sin(th), np.sin(ph)],
                                         axis=-1).astype(np.float32)          # (rings, columns, 3)
        self.angle_min, self.angle_max, self.angle_increment = float(yaw[0]), float(yaw[-1]), step
        self.range_min = float(p.get("minDistance", 0.0))
        self.range_max = float(p.get("maxDistance", 10.0))
        if not 0 <= self.range_min < self.range_max:
            raise SensorConfigError(f"{where}: 0 <= minDistance < maxDistance expected, got "
                                    f"{self.range_min}, {self.range_max}")
        self.scan_time = self.period
        self.noise_blocks = self._noise_blocks(noise, 1, f"{where}.noise")
        self.frame = self.name + "_laser_frame"

    def _init_camera(self, config, where):
        from ..render import camera_parameters, intrinsics
        self.mode = str(self.sensor.params.get("type", "COLOR")).upper()
        if self.mode not in VISION_MODES:
            raise SensorConfigError(f"{where}: VisionSensor type {self.mode!r}; expected one of {', '.join(VISION_MODES)}")
        self.width, self.height, self.fov, self.near, self.far = camera_parameters(self.sensor)
        if self.width <= 0 or self.height <= 0 or not (0 < self.fov < math.pi) or not (0 < self.near < self.far):
            raise SensorConfigError(f"{where}: width/height > 0, 0 < fieldOfView < pi and 0 < frontClipDistance "
                                    f"< backClipDistance expected, got {self.width}x{self.height}, "
                                    f"{self.fov}, {self.near}, {self.far}")
        self.fx, self.fy, self.cx, self.cy = intrinsics(self.width, self.height, self.fov)
        self.color = self.mode in ("COLOR", "COLOR_DEPTH", "MONO", "MONO_DEPTH")
        self.mono = self.mode.startswith("MONO")
        self.depth = self.mode.endswith("DEPTH")
        shape = (self.height, self.width)
        self.color_frames = FramePool(shape if self.mono else shape + (3,), np.uint8)     # (page-aligned: ros/direct_file.py)
        self.depth_frames = FramePool(shape, np.float32)
        self.points = bool(config.get("points", False))
        noise = config.get("noise", self.sensor.params.get("noise")) or {}
        if not isinstance(noise, dict) or set(noise) - {"color", "depth"}:
            raise SensorConfigError(f"{where}.noise: a camera takes {{color: {{...}}, depth: {{...}}}}, got {noise!r}")
        self.noise_blocks = (self._noise_blocks(noise.get("color"), 1, f"{where}.noise.color")
                             + self._noise_blocks(noise.get("depth"), 1, f"{where}.noise.depth"))
        self.frame = self.name + "_optical_frame"
        if self.mode == "NONE":
            self.enabled = False                  # no data at all (Choreonoid would render COLOR)

    # -- state -------------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        """Whether the device samples: enabled by its configuration and not idle."""
        return self._enabled and not self.idle

    @enabled.setter
    def enabled(self, on):
        self._enabled = bool(on)

    def set_idle(self, idle: bool, step: int) -> None:
        """Stop sampling (idle: nothing renders, ray-casts or evaluates it; its last reading stays)
        or start again after `step` steps of dt: the schedule then resumes at the first of the
        device's own instants k / rate after that step, as if it had run all along."""
        idle = bool(idle)
        if idle == self.idle:
            return
        self.idle = idle
        if not idle:
            self.start_at(step)

    def reset(self):
        """Back to t = 0: the schedule, the queue, and the noise (re-seeded: same seed, same run)."""
        self.k_next = 0
        self._schedule(0)
        self.pending = deque()
        self.latest = None
        self.shown = deque(maxlen=SHOWN)    # the newest readings made visible, oldest first
        self.last_stamp = None
        rng = device_rng(self.seed, self.name)
        if self.kind == "camera":
            self.noise = [NoiseProcess([b], rng) for b in self.noise_blocks]
        else:
            self.noise = NoiseProcess(self.noise_blocks, rng)
        self.arrivals.new = True

    @property
    def variance(self):
        """White-noise variance per channel (camera: color, depth)."""
        if self.kind == "camera":
            return np.concatenate([n.variance for n in self.noise])
        return self.noise.variance

    def start_at(self, step):
        """Start sampling at step count `step` (a device that joins a running world): its first
        instant is the first k / rate at or after that step's time."""
        self.k_next = int(math.ceil(step * self.dt / self.period - 1e-6))
        self._schedule(step)

    def _schedule(self, step):
        """next_step = the first step count after `step` at whose end this device samples: its
        next instant k_next / rate is reached (at the step's start for the lagging kinds)."""
        due = self.k_next * self.period
        self.next_step = max(step + 1, int(math.ceil(due / self.dt - 1e-6)) + self.lag_steps)

    def skip(self, stamp):
        """Advance the schedule past the instant `stamp` without a sample (a frame the render
        thread had no time for)."""
        self.k_next = int(math.floor(stamp / self.period + 1e-6)) + 1
        self._schedule(self.next_step)

    def taken(self, stamp):
        """Advance the schedule past an acquisition at `stamp`; returns the time since the last one."""
        self.skip(stamp)
        dt = self.period if self.last_stamp is None else stamp - self.last_stamp
        self.last_stamp = stamp
        return dt

    def push(self, reading):
        """A new reading, visible once its delay has passed (visible)."""
        self.pending.append(reading)
        self.arrivals.new = True       # after the append: whoever clears it first looks after

    def show(self, reading):
        """A new reading visible at once (no delay), from the thread that reads them."""
        self.latest = reading
        self.shown.append(reading)
        self.arrivals.new = True

    def visible(self, t):
        """The newest reading whose stamp + delay has passed at time t (every reading made
        visible goes through `shown` too, for those who must see each one: the publisher)."""
        while self.pending and self.pending[0].stamp + self.delay <= t + 1e-9:
            self.latest = self.pending.popleft()
            self.shown.append(self.latest)
        return self.latest

    def shown_after(self, reading):
        """The readings made visible after `reading` (None: all that `shown` keeps), oldest
        first: several when frames rendered on a thread arrive between two looks."""
        shown = self.shown
        if shown and shown[-1] is reading:
            return []
        if len(shown) < 2 or shown[-2] is reading:
            return [shown[-1]] if shown else []
        items = list(shown)
        for k in range(len(items) - 1, -1, -1):
            if items[k] is reading:
                return items[k + 1:]
        return items

    # -- values ------------------------------------------------------------------------------
    def finish_kinematic(self, stamp, raw):
        """Noise and saturation on one accelerometer/gyro/force sample -> Reading."""
        n = CHANNELS[self.kind]
        dt = self.taken(stamp)
        values = self.noise.apply(raw[:n].copy(), dt)
        saturated = False
        if self.saturate:
            clipped = np.clip(values, -self.limits[:n], self.limits[:n])
            saturated = bool((clipped != values).any())
            values = clipped
        return Reading(stamp, self.frame, values, saturated)

    def finish_range(self, stamp, distances, dt=None, intensities=None):
        """dt: time since the previous sample when the schedule was advanced already (taken)."""
        dt = self.taken(stamp) if dt is None else dt
        finite = np.isfinite(distances)
        out = distances.copy()
        if self.noise.active and finite.any():
            out[finite] = self.noise.apply(distances[finite], dt)
        out[finite & (out > self.range_max)] = np.inf
        out[finite & (out < self.range_min)] = -np.inf      # REP 117: too close
        if intensities is not None:
            intensities = np.where(np.isfinite(out), intensities, 0.0).astype(np.float32)
        return Reading(stamp, self.frame, out, intensities=intensities)

    def finish_camera(self, stamp, color, depth, dt=None):
        dt = self.taken(stamp) if dt is None else dt
        color_noise, depth_noise = self.noise
        if color is not None and color_noise.active:
            noisy = np.clip(np.rint(color_noise.apply(color.astype(np.float64) / 255.0, dt) * 255.0), 0, 255)
            color = self.color_frames.take()     # page-aligned as a noiseless frame: a bag writes it uncopied
            np.copyto(color, noisy, casting="unsafe")
        if depth is not None and depth_noise.active:
            finite = np.isfinite(depth)
            depth[finite] = depth_noise.apply(depth[finite].astype(np.float64), dt).astype(np.float32)
        return Reading(stamp, self.frame, Images(color, depth))
