"""Cost of the simulated sensors on the bundled world (SR1 with 2 cameras and a range sensor, on
a floor), at the robot's initial pose.

    python bench/sensors.py [--quick]

Optical sensors (mbsim_ros.render):
  - one COLOR_DEPTH frame of LeftCamera at its own 320x240 (fov, clip distances from the
    model), and the same view at 640x480: render() into preallocated buffers;
  - the 320x240 frame from `mbsim render`'s default view (the whole robot in view; the
    LeftCamera looks down at the floor and sees none of the robot);
  - one scan of ChestRange: n = 2 floor(scanAngle / 2 / scanStep) + 1 rays in the sensor's XZ
    plane, ray i along (-sin th, 0, -cos th) in the sensor frame with th = (i - floor(n/2))
    scanStep, up to maxDistance: cast_rays() into a preallocated buffer.
Each time is the best per-call time over several timed batches after warm-up (numba compiles
on the first call; see common.time_per_call), so Python call overhead is included. Budget:
two 30 Hz cameras cost 2 * 30 * t_frame per simulated second; at the ~80 us physics step
(1000 steps per simulated second) that is below the step's cost when t_frame < 1.3 ms.

Inertial and force sensors (accelerometer, gyro, force): one evaluation of all of them, and the
standing robot's cost per step with and without all sensors at their rates (bench_devices).
"""
import argparse
import sys
import warnings

import numpy as np

from common import print_table, time_per_call

FRAME_TARGET = 0.010      # the hard limit per 320x240 frame (s)
FRAME_AIM = 0.0015        # two 30 Hz cameras cheaper than the physics step on average
SCAN_TARGET = 0.001       # one range scan of ~700 rays


def load_world():
    """The bundled world's models (as `mbsim run` loads them) and its Scene at the initial pose."""
    from mbsim_ros.cli import DEFAULT_WORLD, _load
    from mbsim_ros.render import world_scene
    models, _ = _load(DEFAULT_WORLD, floating_base=False)
    return models, world_scene(models)


def sensor(models, name):
    for m in models:
        for s in m.sensors:
            if s.name == name:
                return s
    raise RuntimeError(f"the bundled world has no sensor {name!r}")


def bench_render(models, scene, timing):
    """[(label, seconds per call, detail)] for the camera frames and the range scan."""
    from mbsim_ros.render import (camera_parameters, cast_rays, framing_view, look_at,
                                  range_directions, render, sensor_pose)
    rows = []
    cam = sensor(models, "LeftCamera")
    T = sensor_pose(scene, cam)
    width, height, fov, near, far = camera_parameters(cam)
    for w, h in ((width, height), (640, 480)):
        color = np.empty((h, w, 3), np.uint8)
        depth = np.empty((h, w), np.float32)
        t = time_per_call(render, scene, T, w, h, fov, near, far, color, depth, **timing)
        seen = np.isfinite(depth).mean()
        rows.append((f"LeftCamera COLOR_DEPTH {w}x{h}", t,
                     f"{scene.triangle_count} triangles, {seen:.0%} of pixels hit"))
    # the whole robot in view (the LeftCamera sees the floor only): `mbsim render`'s default view
    T_view = look_at(*framing_view(models, scene, fov))
    color = np.empty((height, width, 3), np.uint8)
    depth = np.empty((height, width), np.float32)
    t = time_per_call(render, scene, T_view, width, height, fov, near, np.inf, color, depth, **timing)
    rows.append((f"whole-robot view COLOR_DEPTH {width}x{height}", t,
                 f"mbsim render's default view, {np.isfinite(depth).mean():.0%} of pixels hit"))
    rng = sensor(models, "ChestRange")
    p = rng.params
    T = sensor_pose(scene, rng)
    dirs = np.ascontiguousarray(range_directions(p["scanAngle"], p["scanStep"]) @ T[:3, :3].T)
    origins = np.ascontiguousarray(np.tile(T[:3, 3], (len(dirs), 1)))
    out = np.empty(len(dirs))
    t = time_per_call(cast_rays, scene, origins, dirs, p["maxDistance"], out, **timing)
    rows.append((f"ChestRange scan, {len(dirs)} rays", t,
                 f"{len(scene.prim_kind)} primitives, {np.isfinite(out).mean():.0%} of rays hit "
                 f"within {p['maxDistance']:g} m"))
    return rows


def bench_devices(models, timing):
    """[(label, seconds, detail)]: one evaluation of all accelerometers, gyros and force sensors
    (one sense_kernel call with the step's contacts), and the cost per physics step of the
    standing robot with and without every sensor sampling at its rate (IMU and force 1 kHz,
    cameras 30 Hz, range 10 Hz): the issue's budget is sensors < physics step."""
    import time

    import mbsim_ros as mb
    from mbsim_ros.cli import hold_initial_pose
    from mbsim_ros.dynamics import Physics as PhysicsOnly
    hold_initial_pose(models, 2000)
    sim = mb.Simulation(models)
    sim.step(300)                                   # standing on the floor: contacts in play
    kin = [d.name for d in sim.devices.values() if d.kind in ("accelerometer", "gyro", "force")]
    t_eval = time_per_call(sim._sense_kinematic, **timing)
    rows = [(f"accelerometer + gyro + force, all {len(kin)}", t_eval,
             f"{', '.join(kin)}; {len(sim.contacts())} contacts as external forces")]

    def per_step(simulation, steps=2000):
        best = np.inf
        for _ in range(max(2, timing["batches"] // 3)):
            t0 = time.perf_counter()
            for _ in range(steps):
                simulation.step()
            best = min(best, (time.perf_counter() - t0) / steps)
        return best
    bare = PhysicsOnly(models)
    bare.step(300)
    t_bare, t_all = per_step(bare), per_step(sim)
    rows.append(("physics step alone (sim.step())", t_bare, "dynamics.Physics, contact LCP, 1 kHz"))
    rows.append(("physics step + every sensor at its rate", t_all,
                 f"sensors add {1e6 * (t_all - t_bare):.1f} us per step on average "
                 f"({'less' if t_all - t_bare < t_bare else 'MORE'} than the physics step)"))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and shorter batches")
    args = parser.parse_args()
    timing = dict(batches=3, batch_seconds=0.01) if args.quick else dict(batches=9, batch_seconds=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models, scene = load_world()
    print(f"bench/sensors.py: the bundled world ({', '.join(m.name for m in models)}) at its initial "
          f"pose; {scene!r}")
    print(f"timing: best per-call time of {timing['batches']} batches of >= "
          f"{timing['batch_seconds'] * 1e3:g} ms each after warm-up, one thread")
    rows = bench_render(models, scene, timing) + bench_devices(models, timing)
    print()
    print_table(["measure", "time (us)", "detail"], [[label, f"{t * 1e6:.1f}", detail] for label, t, detail in rows])
    frame, scan = rows[0][1], rows[3][1]
    per_second = 2 * 30 * frame
    print()
    print(f"320x240 frame: {frame * 1e3:.3f} ms (hard limit {FRAME_TARGET * 1e3:g} ms: "
          f"{'met' if frame < FRAME_TARGET else 'MISSED'}; aim {FRAME_AIM * 1e3:g} ms: "
          f"{'met' if frame <= FRAME_AIM else 'missed'})")
    print(f"two 30 Hz cameras: {per_second * 1e3:.1f} ms of rendering per simulated second, "
          f"{per_second / 1000 * 1e6:.1f} us per 1 ms physics step on average")
    print(f"range scan: {scan * 1e6:.1f} us (limit {SCAN_TARGET * 1e6:g} us: "
          f"{'met' if scan < SCAN_TARGET else 'MISSED'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
