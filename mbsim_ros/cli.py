"""The `mbsim` command: run a model, describe it, convert it, render it, plot a recording.

    mbsim run [MODEL ...] [--duration S] [--rtf R] [--bag DIR] [--transport auto|rclpy|dds|none]
              [--config YAML]                         simulate and publish (default: the SR1 world)
    mbsim info MODEL                                  links, joints, sensors, mass, what the loader read
    mbsim convert MODEL -o robot.urdf                 URDF for robot_description / RViz
    mbsim render [MODEL ...] -o view.png              a picture of the world or of a camera's view
    mbsim plot BAG -o plot.png                        recorded IMU, wrench and joint traces
    mbsim warmup                                      compile every numba kernel ahead of time

Bad input ends with one line on stderr and exit status 2.
"""
import argparse
import os
import sys
import time

from ._kernel_cache import CompileReport, cache_root, compile_report
from .model import ConfigError, ModelError, SimulationError
from .ros.world import DEFAULT_WORLD, hold_initial_pose  # noqa: F401 (the bundled world, used by tests and bench)
from .ros.world import load_models as _load


DEFAULT_DURATION = 5.0      # s, mbsim run when neither the user nor the model says


def cmd_run(args):
    from tqdm import tqdm
    from .ros.bag import BagTransport
    from .ros.config import load_config
    from .ros.session import Session, simulation
    from .ros.world import load_world
    from .ros.transport import FanoutTransport, transport_for

    overrides = dict(model=",".join(args.models) or None, dt=args.dt, duration=args.duration, integrator=args.integrator,
                     contact=args.contact, hold=args.hold, real_time_factor=args.rtf, seed=args.seed,
                     namespace=args.namespace, floating_base=True if args.floating_base else None)
    config = load_config(args.config, overrides)
    if args.bag and os.path.exists(args.bag):
        raise OSError(f"--bag {args.bag}: already exists (rosbag2 refuses to overwrite a bag too)")
    models, notes = load_world(config)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    t0 = time.perf_counter()
    with compile_report(CompileBar(args.quiet)):
        sim = simulation(models, config)
    prepare = time.perf_counter() - t0
    transports = []
    if args.transport != "none":
        try:
            transports.append(transport_for(args.transport))
        except ImportError as e:
            if args.transport != "auto":
                raise
            print(f"note: no live topics ({e})", file=sys.stderr)
    if args.bag:
        transports.append(BagTransport(args.bag, compression=args.compression))
    if not transports:
        transports = [transport_for("none")]
    transport = transports[0] if len(transports) == 1 else FanoutTransport(transports)
    try:
        session = Session(sim, transport, config, log=lambda text: print(f"note: {text}", file=sys.stderr))
    except BaseException:          # a bad devices:/emulate:/commands: entry: leave no bag behind
        transport.close()
        if args.bag:
            import shutil
            shutil.rmtree(args.bag, ignore_errors=True)     # created above by this run, still empty
        raise
    duration = config["duration"] or DEFAULT_DURATION
    steps = int(round(duration / sim.dt))
    rtf = config["real_time_factor"]
    print(f"simulating {', '.join(m.name for m in models)}: {sim.nv} DOF, {len(sim.devices)} sensors, "
          f"dt = {sim.dt:g} s, contact {sim.contact}, {duration:g} s ({steps} steps) at real-time factor {rtf:g}"
          f"{' (as fast as possible)' if rtf == 0 else ''}; topics on {args.transport}"
          f"{', recorded to ' + args.bag if args.bag else ''}")
    bar = tqdm(total=steps, unit="step", disable=args.quiet, mininterval=0.5)

    def progress(stats):
        bar.update(stats["steps"] - bar.n)
        bar.set_postfix_str(f"t={stats['sim_time']:.2f}s rtf={stats['rtf']:.2f}")
    session.runner.progress = progress
    hil = session.bridge.hil
    hil_status = []
    try:
        stats = session.run(duration)
        hil_status = hil.statuses() if hil is not None else []     # as the run ended, before the ports close
    finally:
        bar.close()
        session.close()
    print(f"steps: {stats['steps']}  simulated: {stats['sim_time']:.3f} s  wall: {stats['wall_time']:.3f} s  "
          f"real-time factor: {stats['rtf']:.2f}  overruns: {stats['overruns']}  lateness mean/p99/max: "
          f"{stats['lateness_mean_ms']:.3f}/{stats['lateness_p99_ms']:.3f}/{stats['lateness_max_ms']:.3f} ms  "
          f"(model compile and load {prepare:.2f} s)")
    root = models[0].root_links[0]
    position = sim.link_transforms()[root][:3, 3]
    print(f"final position of {root}: [{' '.join(f'{x:.3f}' for x in position)}]; {len(sim.contacts())} contacts")
    dropped = session.dropped()
    print("messages per topic" + (f" ({dropped} steps of messages dropped: publishing fell behind)" if dropped else "") + ":")
    for topic, v in sorted(transport.stats().items()):
        if v.get("direction", "out") == "out":
            print(f"  {topic:<44} {v['messages']:>7}  {v['type']}")
    if hil_status:
        print("hardware in the loop:")
        for name, level, message, values in hil_status:
            faults = ", ".join(f"{k[6:]} {v}" for k, v in values.items() if k.startswith("fault_")) or "no faults"
            if name.startswith("mbsim: device "):
                detail = (f"{values['received']} samples received, {values['published']} published, "
                          f"{values['superseded']} superseded")
            elif name.startswith("mbsim: emulate "):
                detail = f"{values['frames']} frames written, {values['dropped']} dropped, {values['replies']} replies"
            else:
                detail = f"{values['lines']} lines, {values['commands']} commands"
            print(f"  {name[7:]}: {message}; {detail}; {faults}")
    if args.bag:
        print(f"wrote bag {args.bag}")
    return 0


class CompileBar(CompileReport):
    """The first run's compilation on the terminal: a line at once, then a bar over the kernels."""

    def __init__(self, quiet=False):
        super().__init__()
        self.quiet = quiet
        self.bar = None

    def started(self):
        print("compiling the numba kernels (first run of this installation only: later runs load them "
              "from the cache; `mbsim warmup` compiles them ahead of time)", file=sys.stderr, flush=True)

    def progress(self):
        if self.quiet or not self.kernels:
            return
        if self.bar is None:
            from tqdm import tqdm
            self.bar = tqdm(total=self.kernels, unit="kernel", desc="compiling", mininterval=0.2)
        self.bar.total = self.kernels
        self.bar.n = self.ready
        self.bar.set_postfix_str(f"{self.kernel}: {self.function}"[:60])

    def finished(self):
        if self.bar is not None:
            self.bar.close()
        print(f"compiled {self.functions} functions in {self.cpu:.0f} CPU s, cached in {cache_root()}",
              file=sys.stderr, flush=True)


def cmd_warmup(args):
    from .warmup import warm_up_everything
    with compile_report(CompileBar(args.quiet)) as report:
        warm_up_everything()
    print(f"every kernel is ready in {cache_root()}"
          + (f" ({report.functions} functions compiled)" if report.compiling else " (all were cached already)"))
    return 0


def cmd_plot(args):
    from .ros.plot import plot_bag
    topics = plot_bag(args.bag, args.output)
    print(f"wrote {args.output} ({len(topics)} topics: {', '.join(topics)})")
    return 0


def cmd_info(args):
    (model,), notes = _load([args.model], args.floating_base)
    print(f"{model.name}: {len(model.links)} links, {len(model.joints)} joints, nq = {model.nq}, "
          f"nv = {model.nv}, total mass {model.total_mass:.4g} kg, gravity {model.gravity.tolist()}")
    children = {}
    for j in model.joints:
        children.setdefault(j.parent, []).append(j)

    def show(parent, depth):
        for j in children.get(parent, []):
            link = model.link(j.child)
            print(f"{'  ' * depth}{j.child} ({link.mass:.4g} kg) <- {j.name} [{j.type}]")
            show(j.child, depth + 1)
    show(None, 1)
    if model.sensors:
        print("sensors:")
        for s in model.sensors:
            print(f"  {s.name} [{s.type}] on {s.link}")
    if model.constraints:
        print("loop constraints:")
        for c in model.constraints:
            print(f"  {c.name} [{c.type}] {c.link1} - {c.link2}")
    if model.report:
        print("read from the file:")
        sections = {}
        for section, name, what in model.report:
            sections.setdefault(section, []).append((name, what))
        for section, items in sections.items():
            print(f"  {section}:")
            for name, what in items:
                print(f"    {name}: {what}")
    for note in notes + model.warnings:
        print(f"note: {note}")
    return 0


def cmd_convert(args):
    from .formats import to_urdf
    (model,), _ = _load([args.model], args.floating_base)
    text = to_urdf(model)
    with open(args.output, "w") as f:
        f.write(text)
    print(f"wrote {args.output} ({len(model.links)} links, {len(model.joints)} joints)")
    return 0


def cmd_render(args):
    import numpy as np
    from .render import (camera_parameters, depth_to_image, framing_view, look_at, render,
                         sensor_pose, world_scene, write_png)

    def fail(message):
        print(f"mbsim: {message}", file=sys.stderr)
        return 2

    def point(text):
        try:
            xyz = np.array([float(x) for x in text.split(",")])
        except ValueError:
            xyz = np.zeros(0)
        return xyz if xyz.shape == (3,) and np.all(np.isfinite(xyz)) else None

    if args.camera and (args.eye or args.target):
        return fail("render: give either --camera or --from/--to, not both")
    if bool(args.eye) != bool(args.target):
        return fail("render: --from and --to go together")
    eye = target = None
    if args.eye:
        eye, target = point(args.eye), point(args.target)
        for value, text, flag in ((eye, args.eye, "--from"), (target, args.target, "--to")):
            if value is None:
                return fail(f"render: {flag} {text!r}: expected three numbers x,y,z (e.g. {flag}=1.5,-2,1)")
    paths = args.models or DEFAULT_WORLD
    models, notes = _load(paths, args.floating_base)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    scene = world_scene(models)                  # every model at its initial pose
    if args.camera:
        cameras = [s for m in models for s in m.sensors if s.type == "camera"]
        found = [s for s in cameras if s.name == args.camera]
        if not found:
            names = ", ".join(s.name for s in cameras) or "none"
            return fail(f"render: no camera named {args.camera!r} (cameras: {names})")
        width, height, fov, near, far = camera_parameters(found[0])
        T = sensor_pose(scene, found[0])
        what = f"camera {args.camera}"
    else:
        width, height, fov, near, far = 640, 480, 0.785, 0.01, np.inf
        if eye is None:
            eye, target = framing_view(models, scene, args.fov or fov)
            what = "the world from the front-right, above"
        else:
            what = f"from {eye.tolist()} to {target.tolist()}"
        if np.allclose(eye, target):
            return fail("render: --from and --to are the same point")
        T = look_at(eye, target)
    width, height = args.width or width, args.height or height
    fov = args.fov or fov
    if width <= 0 or height <= 0 or not 0 < fov < np.pi:
        return fail(f"render: need a positive --width and --height and 0 < --fov < pi, "
                    f"got {width}x{height}, fov {fov:g}")
    color, depth = render(scene, T, width, height, fov, near, far)
    write_png(args.output, color)
    print(f"wrote {args.output} ({width}x{height}, {what})")
    if args.depth:
        write_png(args.depth, depth_to_image(depth))
        print(f"wrote {args.depth} (depth: white = near, black = nothing)")
    return 0


def build_parser():
    p = argparse.ArgumentParser(prog="mbsim", description="mbsim_ros: multibody simulation for ROS 2")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="simulate a model (default: the bundled SR1 humanoid on a floor)")
    run.add_argument("models", nargs="*", help="model files (.wrl, .urdf); several make one world")
    run.add_argument("--duration", type=float,
                     help="simulated seconds (default: the model's end_time, else 5)")
    run.add_argument("--rtf", type=float, help="real-time factor (default 1; 0 = as fast as possible)")
    run.add_argument("--bag", metavar="DIR", help="also record every topic into this rosbag2 (MCAP) directory")
    run.add_argument("--compression", choices=["zstd"], help="bag storage compression")
    run.add_argument("--transport", default="auto", choices=["auto", "rclpy", "dds", "none"],
                     help="live topics: rclpy when installed, else DDS (auto); none = bag only")
    run.add_argument("--config", metavar="YAML", help="run configuration (see config/sim.yaml)")
    run.add_argument("--namespace", help="topic namespace (default: the first model's name)")
    run.add_argument("--seed", type=int, help="sensor noise seed (default 0)")
    run.add_argument("--dt", type=float, help="time step in seconds (default: the model's time_step, else 0.001)")
    run.add_argument("--integrator", choices=["semi-implicit-euler", "rk4"])
    run.add_argument("--contact", choices=["lcp", "penalty", "none"],
                     help="contact model (default: the model's contact method, else lcp)")
    run.add_argument("--hold", type=float, metavar="K",
                     help="hold joints at their initial angles with springs of stiffness K "
                          "(N m/rad or N/m; default 2000; 0 = limp)")
    run.add_argument("--floating-base", action="store_true", help="URDF: free joint above the root link")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.set_defaults(func=cmd_run)
    info = sub.add_parser("info", help="print a model's tree, joints, sensors and mass")
    info.add_argument("model")
    info.add_argument("--floating-base", action="store_true")
    info.set_defaults(func=cmd_info)
    conv = sub.add_parser("convert", help="write a model as URDF")
    conv.add_argument("model")
    conv.add_argument("-o", "--output", required=True)
    conv.add_argument("--floating-base", action="store_true")
    conv.set_defaults(func=cmd_convert)
    ren = sub.add_parser("render", help="draw the world (or what one camera sees) into a PNG")
    ren.add_argument("models", nargs="*", help="model files (default: the bundled SR1 world)")
    ren.add_argument("-o", "--output", required=True, help="the PNG to write")
    ren.add_argument("--camera", metavar="NAME", help="render what this camera sensor sees, at its "
                     "own size, field of view and clip distances unless overridden")
    ren.add_argument("--from", dest="eye", metavar="X,Y,Z",
                     help="look-at view from this point (negative first number: --from=-2,1,1)")
    ren.add_argument("--to", dest="target", metavar="X,Y,Z", help="... toward this point (up = +z)")
    ren.add_argument("--width", type=int, help="pixels (default 640, or the camera's)")
    ren.add_argument("--height", type=int, help="pixels (default 480, or the camera's)")
    ren.add_argument("--fov", type=float, help="field of view over the shorter side, radians "
                     "(default 0.785, or the camera's)")
    ren.add_argument("--depth", metavar="PNG", help="also write the depth image (grey, near = white)")
    ren.add_argument("--floating-base", action="store_true", help="URDF: free joint above the root link")
    ren.set_defaults(func=cmd_render)
    plot = sub.add_parser("plot", help="plot the IMU, wrench and joint traces of a recorded bag")
    plot.add_argument("bag", help="a rosbag2 directory written by mbsim run --bag")
    plot.add_argument("-o", "--output", required=True, help="the PNG to write")
    plot.set_defaults(func=cmd_plot)
    warm = sub.add_parser("warmup", help="compile every numba kernel now, into this installation's cache "
                          "(an install step, a container build, CI), so that no run compiles")
    warm.add_argument("--quiet", action="store_true", help="no progress bar")
    warm.set_defaults(func=cmd_warmup)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if any(x is not None and x <= 0 for x in (getattr(args, "duration", None), getattr(args, "dt", None))):
        print("mbsim: --duration and --dt must be positive", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except (ModelError, ConfigError, SimulationError, OSError, ImportError) as e:
        print(f"mbsim: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
