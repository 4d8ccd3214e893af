"""The `mbsim` command: run a model, describe it, convert it, render it, plot a recording.

    mbsim run [MODEL ...] [--duration S] [--rtf R] [--bag DIR] [--transport auto|rclpy|dds|foxglove|none]
              [--config YAML]                         simulate and publish (default: the SR1 world)
    mbsim run ... --view [--view-port 8080]           ... and watch it live at http://127.0.0.1:8080
    mbsim info MODEL                                  links, joints, sensors, mass, what the loader read
    mbsim convert MODEL -o robot.urdf                 URDF for robot_description / RViz, meshes beside it
    mbsim render [MODEL ...] -o view.png              a picture of the world or of a camera's view
                 [--at T [--bag DIR]]                 ... at time T of a run (simulated) or of a recorded bag
    mbsim plot BAG -o plot.png [--joints NAMES]       recorded IMU, wrench and joint traces
    mbsim export BAG --images DIR --csv DIR           a bag's camera frames as PNG (--video: MP4), numbers as CSV
    mbsim view BAG [--view-port 8080]                 replay a bag in the browser, with a time slider
    mbsim bag repair BAG                              a bag cut off by a kill: complete chunks kept, summary written
    mbsim warmup                                      compile every numba kernel ahead of time
    mbsim batch SPEC [-o DIR] [--compare BASELINE]    many scenarios headless on Dask -> Parquet

Models: .wrl (OpenHRP), .urdf, .osim (OpenSim, y up: --z-up stands it in the z-up world), .yaml
(Chrono), .sdf/.world (SDFormat).

Bad input ends with one line on stderr and exit status 2. SIGINT or SIGTERM ends `mbsim run` at
the next step with the bag closed and complete, the summary, and exit status 0.
"""
import argparse
import os
import re
import sys
import time

from ._kernel_cache import CompileReport, cache_root, compile_report
from .model import ConfigError, ModelError, SimulationError
from .run.world import DEFAULT_WORLD, hold_initial_pose  # noqa: F401 (the bundled world, used by tests and bench)
from .run.world import load_models as _load


DEFAULT_DURATION = 5.0      # s, mbsim run when neither the user nor the model says
MODEL_FILES = ".wrl (OpenHRP), .urdf, .xacro, .osim (OpenSim), .yaml (Chrono), .sdf/.world (SDFormat)"
IMAGE_FILES = (".png", ".jpg", ".jpeg")     # mbsim render -o / --depth
MAX_IMAGE_SIDE = 16384                      # pixels, mbsim render --width / --height
MIN_FOV = 1e-6                              # rad, mbsim render --fov (narrower: the framing distance overflows)
RENDER_BYTES_PER_PIXEL = 40                 # color, depth, inverse depth, encoding: what a frame holds
Z_UP_HELP = "OpenSim models (y up): turn them so that their +y is the world's +z"
_SUMMARY_STEPS = 300_000    # mbsim run's lateness summary: every step of runs up to this many (2.4 MB)


class _Parser(argparse.ArgumentParser):
    """argparse, but bad usage is one line on stderr and exit status 2, as every other error."""

    def error(self, message):
        print(f"{self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


class UsageError(Exception):
    """A command-line value the command cannot use: one line, exit status 2."""


def cmd_run(args):
    from .run.config import load_config

    overrides = dict(model=_model_entries(args.models, args.pose), dt=args.dt, duration=args.duration, integrator=args.integrator,
                     contact=args.contact, hold=args.hold, real_time_factor=args.rtf, seed=args.seed,
                     namespace=args.namespace, floating_base=args.floating_base,
                     keyframe=args.keyframe,
                     on_ground=True if args.on_ground else None, ground=False if args.no_ground else None,
                     z_up=True if args.z_up else None, massless_armature=args.massless_armature,
                     bound_massless=False if args.no_bound_massless else None,
                     realtime_priority=args.realtime_priority, cpu=args.cpu)
    config = load_config(args.config, overrides)
    _check_foxglove_options(args)
    if args.bag and os.path.exists(args.bag):
        raise OSError(f"--bag {args.bag}: already exists (rosbag2 refuses to overwrite a bag too)")
    view = None
    if args.view:       # bound first: a port in use ends the run before anything is loaded
        from .view.process import ViewProcess
        view = ViewProcess(args.view_host, args.view_port, log=lambda text: print(f"warning: {text}", file=sys.stderr))
        print(f"view: {view.url} (open it in a browser{'' if config.duration else '; the run goes on until Ctrl-C'})",
              flush=True)
    try:
        return _run(args, config, view)
    finally:
        if view is not None:
            view.close()       # (again after the session closed it: nothing more to do)


def _run(args, config, view):
    """mbsim run once the configuration is read (and the view, if asked for, listens)."""
    from tqdm import tqdm
    from .ros.bag import BagTransport
    from .ros.bridge import TF_WARM_UP, WARM_UP_JOBS, Bridge
    from .run import Session, build_simulation
    from .run.stop_signals import catch_stop_signals, signal_name
    from .run.world import load_world
    from .ros.transport import FanoutTransport
    from .ros.transport_choice import transport_for
    models, notes = load_world(config)
    # with the view and no duration given, the run goes on until stopped (the page is for watching)
    duration = config.duration or (None if view is not None else DEFAULT_DURATION)
    steps = int(round(duration / config.dt)) if duration is not None else _SUMMARY_STEPS
    if steps < 1:
        raise UsageError(f"run: a duration of {duration:g} s is less than one step of dt = {config.dt:g} s: "
                         "nothing to simulate (give a longer --duration or a smaller --dt)")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    t0 = time.perf_counter()
    with compile_report(CompileBar(args.quiet)):
        sim = build_simulation(models, config, log=lambda text: print(f"warning: {text}", file=sys.stderr),
                         warm_up_jobs=WARM_UP_JOBS if args.bag else (TF_WARM_UP,))
    prepare = time.perf_counter() - t0
    transports = []
    live = "no live topics"
    if args.transport != "none":
        try:
            server = dict(host=args.foxglove_host, port=args.foxglove_port) if args.transport == "foxglove" else {}
            transports.append(transport_for(args.transport, note=lambda text: print(f"note: {text}", file=sys.stderr),
                                            **server))
            live = _live_topics(transports[0])
        except ImportError as e:
            if args.transport != "auto":
                raise
            print(f"note: no live topics ({e})", file=sys.stderr)
    if args.bag:
        transports.append(BagTransport(args.bag, compression=args.compression))
    if not transports:
        transports = [transport_for("none")]
    transport = transports[0] if len(transports) == 1 else FanoutTransport(transports)
    bars = []                      # the progress bar, made once the run is announced
    slows = []                     # its slow-run hint, made with it

    def progress(stats):
        for bar in bars:
            bar.update(stats["steps"] - bar.n)
            bar.set_postfix_str(f"t={stats['sim_time']:.2f}s rtf={stats['rtf']:.2f}")
        for slow in slows:
            slow(stats)
    try:
        # the summary's lateness over the whole run (up to _SUMMARY_STEPS; the live /diagnostics
        # compute over the same window once a second, off the physics thread)
        note = lambda text: print(f"note: {text}", file=sys.stderr)    # noqa: E731
        bridge = Bridge(sim, transport, config, log=note)
        session = Session(sim, config, listeners=[bridge] + ([view] if view is not None else []), log=note, progress=progress,
                          jitter_window=min(steps + 1, _SUMMARY_STEPS))
    except BaseException:          # a bad devices:/emulate:/commands: entry: leave no bag behind
        transport.close()
        if args.bag:
            import shutil
            shutil.rmtree(args.bag, ignore_errors=True)     # created above by this run, still empty
        raise
    rtf = config.target_rtf
    # SIGINT / SIGTERM: the run ends at the next step, then all below as at its end (the bag
    # closed and complete, the summary, status 0), as the sim_node does. Caught before the
    # "simulating" line, which tells a supervisor the run is on (a stop before run() starts makes
    # it return at once).
    stopped = []
    restore_signals = catch_stop_signals(lambda signum: (stopped.append(signum), session.stop()))
    bar = None
    hil_status = []
    try:
        print(f"simulating {', '.join(m.name for m in models)}: {sim.nv} DOF, {len(sim.devices)} sensors, "
              f"dt = {sim.dt:g} s, contact {sim.contact}, "
              f"{f'{duration:g} s ({steps} steps)' if duration is not None else 'until stopped'} at real-time factor {rtf:g}"
              f"{'' if config.paced else ' (as fast as possible)'}; {live}"
              f"{', recorded to ' + args.bag if args.bag else ''}")
        bar = tqdm(total=steps if duration is not None else None, unit="step", disable=args.quiet, mininterval=0.5)
        bars.append(bar)
        slows.append(SlowRunHint(rtf, bar))
        hil = bridge.hil
        stats = session.run(duration)
        hil_status = hil.statuses() if hil is not None else []     # as the run ended, before the ports close
    finally:
        if bar is not None:
            bar.close()
        session.close()
        restore_signals()
    if stopped:
        print(f"stopped by {signal_name(stopped[0])} at t = {sim.t:.3f} s", file=sys.stderr)
    print(f"steps: {stats['steps']}  simulated: {stats['sim_time']:.3f} s  wall: {stats['wall_time']:.3f} s  "
          f"real-time factor: {stats['rtf']:.2f}  overruns: {stats['overruns']}  lateness mean/p50/p99/max: "
          f"{stats['lateness_mean_ms']:.3f}/{stats['lateness_p50_ms']:.3f}/{stats['lateness_p99_ms']:.3f}/"
          f"{stats['lateness_max_ms']:.3f} ms"
          + (f" (of the last {stats['lateness_steps']} steps)" if 0 < stats['lateness_steps'] < stats['steps'] else "")
          + f"  (model compile and load {prepare:.2f} s)")
    if session.runner.realtime_priority or session.runner.cpu is not None:
        print(f"physics thread: {session.runner.os_status}")
    print(_final_positions(sim) + f"{len(sim.contacts())} contacts")
    dropped = session.dropped()
    print("messages per topic" + (f" ({dropped} steps of messages dropped: publishing fell behind)" if dropped else "") + ":")
    out = {topic: v for topic, v in sorted(transport.stats().items()) if v.get("direction", "out") == "out"}
    for topic, v in out.items():
        print(f"  {topic:<44} {v['messages']:>7}  {v['type']}")
    unread = [topic for topic, v in out.items() if v["messages"] == 0]
    if unread and transports[0].receives:       # a live transport sends a topic only to its subscribers
        print(f"lazy: {len(unread)} topic{'s' if len(unread) > 1 else ''} not published, nobody subscribed; "
              "--transport none --bag DIR records them all")
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
        cameras = [s.name for m in models for s in m.sensors if s.type == "camera"]
        print(_bag_summary(args.bag, transport.stats(), args.compression, cameras))
    return 0


def sim_node(args=None):
    """`ros2 run mbsim_ros sim_node`: the rclpy node (ros/node.py) with the live view when its
    `view` parameter is true (the view and ros/ are sibling layers: they meet here)."""
    from .ros.node import main
    return main(args, listeners=_node_view)


def _node_view(values, log):
    if not values.get("view"):
        return []
    from .view.process import ViewProcess
    view = ViewProcess(values["view_host"], values["view_port"], log=log.warning)
    log.info(f"view: {view.url} (open it in a browser)")
    return [view]


class SlowRunHint:
    """One line, once, when a paced run keeps up with less than half of real time for a second
    (its recent rtf below SLOW_RTF with a target above it): how fast it runs and what usually
    causes it. Shown with --quiet too (a progress bar shows the rtf all along)."""

    SLOW_RTF = 0.5

    def __init__(self, target, bar=None):
        self.target, self.bar, self.said = target, bar, False

    def __call__(self, stats):
        recent = stats.get("rtf_recent", stats["rtf"])
        if self.said or not self.target > self.SLOW_RTF or recent >= self.SLOW_RTF or stats["wall_time"] < 1.0:
            return
        self.said = True
        line = (f"note: running at rtf {recent:.2f} (of {self.target:g}): the step takes longer than it simulates; "
                "usually a model starting inside another or the ground (see the notes above; --on-ground lowers "
                "floating robots onto it) or many contacts; --rtf 0 runs unpaced")
        if self.bar is not None and not self.bar.disable:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr, flush=True)


def _final_positions(sim):
    """'final position of ROOT: [x y z]; ' for each model with a floating base (a welded one
    stays where it was put: nothing to say)."""
    poses = sim.link_transforms()
    roots = [sim.root_link(e) for e, m in zip(sim.entities, sim.models)
             if any(j.parent is None and j.type == "free" for j in m.joints)]
    return "".join(f"final position of {root}: [{' '.join(f'{x:.3f}' for x in poses[root][:3, 3])}]; "
                   for root in roots)


class CompileBar(CompileReport):
    """The first run's compilation on the terminal: a line at once, then a bar over the kernels."""

    FIRST_RUN = ("compiling the numba kernels (first run of this installation only: later runs load them "
                 "from the cache; `mbsim warmup` compiles them ahead of time)")

    def __init__(self, quiet=False, line=FIRST_RUN):
        super().__init__()
        self.quiet = quiet
        self.line = line
        self.bar = None

    def started(self):
        print(self.line, file=sys.stderr, flush=True)

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


def cmd_view(args):
    from .ros.recording import read_recording
    from .view.replay import ReplayView
    try:
        recording = read_recording(args.bag)
    except ValueError as e:          # not a bag, a message that does not decode: named
        raise UsageError(f"view: {e}") from None
    try:
        view = ReplayView(recording, host=args.view_host, port=args.view_port,
                          log=lambda text: print(f"note: {text}", file=sys.stderr))
    except BaseException:
        recording.close()
        raise
    for note in view.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"replaying {args.bag} ({view.duration:.3f} s, {len(view.links)} links, {len(recording.images)} image "
          f"topics) at {view.url} (Ctrl-C ends)", flush=True)
    try:
        view.serve_forever()
    finally:
        view.close()
        recording.close()
    return 0


def cmd_warmup(args):
    from .warmup import cores, warm_up_everything
    workers = cores()
    print(f"compiling every numba kernel into this installation's cache, {workers} process"
          f"{'es' if workers > 1 else ''} (once: runs load them from it)", file=sys.stderr, flush=True)
    bar = None
    if not args.quiet:
        from tqdm import tqdm
        bar = tqdm(total=1000, desc="compiling", bar_format="{desc}: {percentage:3.0f}%|{bar}| {postfix}",
                   mininterval=0.2)

    def progress(p):
        if bar is not None:
            bar.n = int(1000 * p.fraction)
            minutes, seconds = divmod(int(round(p.eta)), 60)
            bar.set_postfix_str(f"ETA {minutes}:{seconds:02d}, {p.done}/{p.groups} groups, {p.functions} functions"
                                + (f"; {', '.join(p.running)}" if p.running else ""), refresh=False)
            bar.refresh()
    t0 = time.monotonic()
    try:
        done = warm_up_everything(progress, workers=workers)
    finally:
        if bar is not None:
            bar.close()
    functions = sum(n for _, n in done.values())
    cpu = sum(c for c, _ in done.values())
    print(f"every kernel is ready in {cache_root()}"
          + (f" ({functions} functions compiled, {cpu:.0f} CPU s in {time.monotonic() - t0:.0f} s)"
             if functions else " (all were cached already)"))
    return 0


def _model_entries(words, poses):
    """The run's `model` setting from the positional words (a file, then its xacro arguments
    name:=value) and the --pose options (the k-th for the k-th model)."""
    entries = []
    for w in words:
        if ":=" in w and entries:
            name, value = w.split(":=", 1)
            entries[-1]["args"][name] = value
        elif ":=" in w:
            raise ConfigError(f"{w}: a xacro argument needs a .xacro model file before it")
        else:
            entries.append(dict(file=w, args={}))
    poses = poses or []
    if not entries:
        if not poses:
            return None
        from .run.world import DEFAULT_WORLD
        entries = [dict(file=p, args={}) for p in DEFAULT_WORLD]
    if len(poses) > len(entries):
        raise ConfigError(f"--pose given {len(poses)} times for {len(entries)} model(s): one pose per model, in order")
    for entry, pose in zip(entries, poses):
        entry["pose"] = list(pose)
    return entries


def _check_foxglove_options(args):
    if args.transport != "foxglove" and (args.foxglove_port is not None or args.foxglove_host is not None):
        raise UsageError("run: --foxglove-port and --foxglove-host are options of --transport foxglove")
    if args.foxglove_port is not None and not 0 <= args.foxglove_port <= 65535:
        raise UsageError(f"run: --foxglove-port {args.foxglove_port} is not a TCP port (0 to 65535)")
    if args.foxglove_host is not None and not args.foxglove_host.strip():
        raise UsageError("run: --foxglove-host is empty (give an address such as 127.0.0.1 or 0.0.0.0)")


def _live_topics(transport):
    """What the run line says about the live transport actually chosen."""
    if transport.kind == "dds":
        return f"topics on DDS (cyclonedds, ROS_DOMAIN_ID {transport.domain_id})"
    if transport.kind == "foxglove":
        from .run.network import is_loopback
        if not is_loopback(transport.host):
            print(f"note: the Foxglove server listens on {transport.host}, not this machine only: whoever reaches "
                  f"port {transport.port} there sees every topic and can publish joint commands", file=sys.stderr)
        return f"topics for Foxglove / Lichtblick on {transport.url}"
    return f"topics on {transport.kind}"


def _bag_summary(bag, stats, compression, cameras):
    """'wrote bag DIR (size, the share of camera images)' and, where images are most of an
    uncompressed bag, how to make it smaller."""
    from .ros.messages import IMAGE
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(bag) for f in files)
    out = [v for v in stats.values() if v.get("direction", "out") == "out"]
    total = sum(v["bytes"] for v in out)
    images = sum(v["bytes"] for v in out if v["type"] == IMAGE) / total if total else 0.0
    text = f"wrote bag {bag} ({size / 1e6:.3g} MB{f'; raw camera images are {100 * images:.0f} % of the messages' if images else ''})"
    if images > 0.5 and not compression:
        off = ", ".join(f"{name}: {{enabled: false}}" for name in cameras) or "CAMERA: {enabled: false}"
        text += (f"; for smaller bags add --compression zstd, or leave the cameras out with a --config "
                 f"holding sensors: {{{off}}}")
    return text


def cmd_plot(args):
    from .ros.plot import plot_bag
    joints = [j.strip() for j in args.joints.split(",") if j.strip()] if args.joints is not None else None
    if joints == []:
        raise UsageError(f"plot: --joints {args.joints!r}: expected joint names or patterns, comma-separated")
    try:
        topics = plot_bag(args.bag, args.output, joints=joints)
    except ValueError as e:          # not a bag, nothing to plot, an unknown joint or file type: named
        raise UsageError(f"plot: {e}") from None
    print(f"wrote {args.output} ({len(topics)} topics: {', '.join(topics)})")
    return 0


def cmd_bag_repair(args):
    from .ros.bag_repair import RepairError, repair_bag
    try:
        done = repair_bag(args.bag, ros_distro=args.ros_distro)
    except RepairError as e:
        raise UsageError(f"bag repair: {e}") from None
    if done.already_complete:
        print(f"{args.bag}: complete (metadata.yaml and the MCAP summary are there): nothing to repair")
        return 0
    span = f", t = {done.start_ns / 1e9:.3f} .. {done.end_ns / 1e9:.3f} s" if done.messages else ""
    print(f"repaired {args.bag}: {done.messages} messages in {done.chunks} chunks{span}; "
          f"{done.dropped_bytes} bytes of a cut-off chunk dropped; wrote the MCAP summary and metadata.yaml")
    return 0


def cmd_export(args):
    from .ros.export import export_csv, export_images, export_video
    if not (args.images or args.video or args.csv):
        raise UsageError("export: give --images DIR, --video FILE.mp4 and/or --csv DIR")
    if args.video and not args.video.lower().endswith(".mp4"):
        raise UsageError(f"export: --video {args.video}: expected a file ending in .mp4")
    topics = [t.strip() for t in args.topics.split(",") if t.strip()] if args.topics is not None else None
    if topics == []:
        raise UsageError(f"export: --topics {args.topics!r}: expected topic names, comma-separated")
    try:
        if args.images:
            counts = export_images(args.bag, args.images, topics)
            print(f"wrote {sum(counts.values())} PNG frames to {args.images} ("
                  + ", ".join(f"{t}: {n}" for t, n in counts.items()) + ")")
        if args.video:
            for path, n in export_video(args.bag, args.video, topics).items():
                print(f"wrote {path} ({n} frames)")
        if args.csv:
            counts = export_csv(args.bag, args.csv, topics)
            print(f"wrote {len(counts)} CSV tables to {args.csv} ("
                  + ", ".join(f"{t}: {n} rows" for t, n in counts.items()) + ")")
    except ValueError as e:          # not a bag, no such topic, an encoding not known: named
        raise UsageError(f"export: {e}") from None
    return 0


def cmd_info(args):
    (model,), notes = _load([args.model], args.floating_base, args.z_up)
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
    for note in dict.fromkeys(notes + model.warnings):     # a loader's warning is in both: once
        print(f"note: {note}")
    return 0


def cmd_convert(args):
    from .formats import to_urdf
    from .formats.urdf import missing_meshes
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        raise UsageError(f"convert: -o {args.output}: no such folder {folder}")
    (model,), _ = _load([args.model], args.floating_base, args.z_up)
    mesh_dir = os.path.join(folder, os.path.splitext(os.path.basename(args.output))[0] + "_meshes")
    mesh_uri = _mesh_uri_for(mesh_dir)
    text = to_urdf(model, mesh_dir=mesh_dir, mesh_uri=mesh_uri)
    with open(args.output, "w") as f:
        f.write(text)
    meshes = len(set(re.findall(r'filename="' + re.escape(mesh_uri) + r'/([^"]+)"', text)))
    line = f"wrote {args.output} ({len(model.links)} links, {len(model.joints)} joints)"
    if meshes:
        named = (f"{mesh_uri}/..." if mesh_uri.startswith("package://") else
                 f"{mesh_uri}/... relative to the URDF (RViz takes package:// or file:// URIs, not relative paths: "
                 "put both in a ROS package)")
        line += f"; {meshes} meshes in {mesh_dir}, named {named}"
    print(line)
    missing = missing_meshes(model)
    if missing:
        shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        print(f"note: {len(missing)} mesh file(s) not found, left out of the URDF: {shown}", file=sys.stderr)
    return 0


def _mesh_uri_for(mesh_dir):
    """How a URDF names files in mesh_dir: package://<name>/<path> inside a ROS package (the
    nearest folder above with a package.xml), else the folder's name, relative to the URDF."""
    folder = os.path.dirname(mesh_dir)
    while True:
        manifest = os.path.join(folder, "package.xml")
        if os.path.isfile(manifest):
            from lxml import etree
            try:
                name = etree.parse(manifest).findtext("name")
            except etree.XMLSyntaxError:
                name = None
            if name:
                return f"package://{name.strip()}/" + os.path.relpath(mesh_dir, folder).replace(os.sep, "/")
        parent = os.path.dirname(folder)
        if parent == folder:
            return os.path.basename(mesh_dir)
        folder = parent


def cmd_render(args):
    import numpy as np
    from .render import (camera_parameters, depth_to_image, framing_view, look_at, render,
                         sensor_pose, world_scene, write_image)

    def fail(message):
        print(f"mbsim: {message}", file=sys.stderr)
        return 2

    def point(text):
        try:
            xyz = np.array([float(x) for x in text.split(",")])
        except ValueError:
            xyz = np.zeros(0)
        return xyz if xyz.shape == (3,) and np.all(np.isfinite(xyz)) else None

    for flag, path in (("-o", args.output), ("--depth", args.depth)):
        if path and os.path.splitext(path)[1].lower() not in IMAGE_FILES:
            return fail(f"render: {flag} {path}: expected a file ending in {', '.join(IMAGE_FILES)}")
    for flag, value in (("--width", args.width), ("--height", args.height)):
        if value is not None and not 0 < value <= MAX_IMAGE_SIDE:
            return fail(f"render: {flag} {value}: expected 1 to {MAX_IMAGE_SIDE} pixels")
    if args.fov is not None and not MIN_FOV <= args.fov < np.pi:
        return fail(f"render: --fov {args.fov:g}: expected radians between {MIN_FOV:g} and pi (e.g. 0.785)")
    if args.camera is not None and (args.eye or args.target):
        return fail("render: give either --camera or --from/--to, not both")
    if bool(args.eye) != bool(args.target):
        return fail("render: --from and --to go together")
    eye = target = None
    if args.eye:
        eye, target = point(args.eye), point(args.target)
        for value, text, flag in ((eye, args.eye, "--from"), (target, args.target, "--to")):
            if value is None:
                return fail(f"render: {flag} {text!r}: expected three numbers x,y,z (e.g. {flag}=1.5,-2,1)")
    if args.bag and args.at is None:
        return fail("render: --bag needs --at T (the time in the recording to draw)")
    if args.at is not None and not (args.at >= 0 and np.isfinite(args.at)):
        return fail(f"render: --at {args.at:g}: expected a time >= 0 in seconds")
    if args.at is not None:
        models, scene, notes, when = _world_at(args)
    else:
        models, notes = _load(args.models or DEFAULT_WORLD, args.floating_base, args.z_up)
        scene, when = world_scene(models), ""        # every model at its initial pose
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    for model in models:
        drawn = [s for link in model.links for s in (link.visuals or link.collisions)]
        blank = [s for s in drawn if s.kind == "mesh" and s.vertices is None]
        if blank:
            names = list(dict.fromkeys(os.path.basename(s.mesh_path or s.name or "?") for s in blank))
            what = ("nothing of it drawn: every shape is" if len(blank) == len(drawn) else
                    f"{len(blank)} of its {len(drawn)} shapes not drawn:")
            print(f"warning: {model.name}: {what} a mesh file missing or unreadable "
                  f"({', '.join(names[:8])}{', ...' if len(names) > 8 else ''})", file=sys.stderr)
    if args.camera is not None:
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
            eye, target = framing_view(models, scene, fov if args.fov is None else args.fov)
            what = "the world from the front-right, above"
        else:
            what = f"from {eye.tolist()} to {target.tolist()}"
        if np.allclose(eye, target):
            return fail("render: --from and --to are the same point")
        T = look_at(eye, target)
    width = width if args.width is None else args.width
    height = height if args.height is None else args.height
    fov = fov if args.fov is None else args.fov
    if width <= 0 or height <= 0 or not 0 < fov < np.pi:      # the camera's own, from the model file
        return fail(f"render: camera {args.camera}: {width}x{height} pixels, field of view {fov:g}: "
                    "expected a positive size and 0 < fov < pi (override with --width, --height, --fov)")
    need, free = width * height * RENDER_BYTES_PER_PIXEL, _available_memory()
    if free is not None and need > free:
        return fail(f"render: a {width}x{height} image needs about {need / 1e9:.3g} GB, more than the "
                    f"{free / 1e9:.3g} GB of memory available")
    color, depth = render(scene, T, width, height, fov, near, far)
    write_image(args.output, color)
    print(f"wrote {args.output} ({width}x{height}, {what}{when})")
    if args.depth:
        write_image(args.depth, depth_to_image(depth))
        print(f"wrote {args.depth} (depth: white = near, black = nothing)")
    return 0


def _world_at(args):
    """(models, scene, notes, what): the world `mbsim run` builds from the same models and flags,
    at time --at: simulated to it (as fast as possible, no topics), or posed from the /tf and
    /tf_static that --bag recorded at it."""
    import numpy as np
    from .run import Session, load_config, load_world, build_simulation
    overrides = dict(model=_model_entries(args.models, args.pose), floating_base=args.floating_base,
                     on_ground=True if args.on_ground else None, ground=False if args.no_ground else None,
                     z_up=True if args.z_up else None, real_time_factor=0.0)
    config = load_config(args.config, overrides)
    models, notes = load_world(config)
    with compile_report(CompileBar()):
        sim = build_simulation(models, config, log=lambda text: print(f"warning: {text}", file=sys.stderr))
    scene = sim.scene
    if args.bag:
        from .ros.export import frame_poses
        try:
            poses = frame_poses(args.bag, args.at)
        except ValueError as e:
            raise UsageError(f"render: {e}") from None
        prefix = config.frame_prefix or ""
        names = sim.compiled.link_names
        missing = [n for n in names if prefix + n not in poses]
        if missing:
            raise UsageError(f"render: {args.bag} has no /tf for link {', '.join(missing[:4])}"
                             f"{', ...' if len(missing) > 4 else ''}: give the models and flags of the run that "
                             "recorded it")
        scene.set_link_poses(np.array([poses[prefix + n][:3, :3] for n in names]),
                             np.array([poses[prefix + n][:3, 3] for n in names]))
        return list(sim.models), scene, notes, f", at t = {args.at:g} s of {args.bag}"
    session = Session(sim, config, listeners=[])
    try:
        session.run(args.at)
    finally:
        session.close()
    return list(sim.models), sim.scene, notes, f", at t = {sim.t:g} s"


def _available_memory():
    """Bytes of memory available now (Linux), or None where the system does not say."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _base_options(parser):
    """--floating-base / --fixed-base: a URDF's root floats unless the file welds it to a link
    named world (as Gazebo places it); these force one or the other."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--floating-base", dest="floating_base", action="store_const", const=True,
                       help="URDF: a free joint above the root link (default: free unless the file welds "
                            "its root to a link named world)")
    group.add_argument("--fixed-base", dest="floating_base", action="store_const", const=False,
                       help="URDF: weld the root link to the world where the file puts it")


def build_parser():
    p = _Parser(prog="mbsim", description="mbsim_ros: multibody simulation for ROS 2")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="simulate a model (default: the bundled SR1 humanoid on a floor)")
    run.add_argument("models", nargs="*", help=f"model files ({MODEL_FILES}); several make one world; "
                     "a .xacro file's arguments follow it as name:=value")
    run.add_argument("--duration", type=float,
                     help="simulated seconds (default: the model's end_time, else 5)")
    run.add_argument("--rtf", type=float, help="real-time factor (default: the model's, as an SDFormat world's "
                                                  "<physics> says, else 1; 0 = as fast as possible)")
    run.add_argument("--bag", metavar="DIR", help="also record every topic into this rosbag2 (MCAP) directory")
    run.add_argument("--compression", choices=["zstd"], help="bag storage compression")
    run.add_argument("--transport", default="auto", choices=["auto", "rclpy", "dds", "foxglove", "none"],
                     help="live topics: rclpy when installed, else DDS (auto); foxglove = a Foxglove "
                          "WebSocket server for the Foxglove app or Lichtblick (no ROS needed); none = bag only")
    run.add_argument("--foxglove-port", type=int, metavar="PORT",
                     help="--transport foxglove: the server's port (default 8765; 0 = any free port)")
    run.add_argument("--foxglove-host", metavar="HOST",
                     help="--transport foxglove: the address to listen on (default 127.0.0.1, this machine only)")
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
    _base_options(run)
    run.add_argument("--no-bound-massless", action="store_true",
                     help="refuse links without mass on moving joints instead of giving them 1 %% of the mass "
                          "and inertia of the body they hang from (MuJoCo's boundmass idea)")
    run.add_argument("--keyframe", metavar="NAME", help="MJCF: start from this <key> (its qpos, qvel and ctrl)")
    run.add_argument("--massless-armature", type=float, metavar="X",
                     help="kg m^2 (kg for sliders): give joints that move only massless links this armature "
                          "(MuJoCo's); without it such a model is refused, naming the joints")
    run.add_argument("--realtime-priority", type=int, metavar="N",
                     help="run the physics thread under SCHED_FIFO at priority N (1-99) when permitted "
                          "(CAP_SYS_NICE or an rtprio limit); otherwise a note says why and the run goes on")
    run.add_argument("--cpu", type=int, metavar="K", help="pin the physics thread to core K (best an isolated one)")
    run.add_argument("--z-up", action="store_true", help=Z_UP_HELP)
    run.add_argument("--pose", nargs=6, type=float, action="append", metavar=("X", "Y", "Z", "ROLL", "PITCH", "YAW"),
                     help="where a model starts (m, rad); once per model, in the order of the models")
    run.add_argument("--on-ground", action="store_true",
                     help="lower each model until its lowest collision point touches what is below it "
                          "(a fixed-base model: its weld moves with it)")
    run.add_argument("--no-ground", action="store_true",
                     help="no ground plane under a floating robot that has nothing else to stand on")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--view", action="store_true",
                     help="serve a live 3D view of the run at http://VIEW_HOST:VIEW_PORT (the run goes on "
                          "until Ctrl-C unless --duration or the configuration says)")
    run.add_argument("--view-port", type=int, default=8080, metavar="PORT", help="the view's port (default 8080)")
    run.add_argument("--view-host", default="127.0.0.1", metavar="HOST",
                     help="the view's address (default 127.0.0.1: this machine only; 0.0.0.0: every interface)")
    run.set_defaults(func=cmd_run)
    info = sub.add_parser("info", help="print a model's tree, joints, sensors and mass")
    info.add_argument("model", help=f"a model file ({MODEL_FILES})")
    _base_options(info)
    info.add_argument("--z-up", action="store_true", help=Z_UP_HELP)
    info.set_defaults(func=cmd_info)
    conv = sub.add_parser("convert", help="write a model as URDF, its meshes as STL or Collada beside it")
    conv.add_argument("model", help=f"a model file ({MODEL_FILES})")
    conv.add_argument("-o", "--output", required=True, help="the URDF to write; meshes go to the folder "
                      "<name>_meshes beside it (package:// URIs inside a ROS package, else relative paths)")
    _base_options(conv)
    conv.add_argument("--z-up", action="store_true", help=Z_UP_HELP)
    conv.set_defaults(func=cmd_convert)
    ren = sub.add_parser("render", help="draw the world (or what one camera sees) into a PNG or JPEG")
    ren.add_argument("models", nargs="*", help=f"model files ({MODEL_FILES}; default: the bundled SR1 world)")
    ren.add_argument("-o", "--output", required=True, help="the image to write (.png, .jpg)")
    ren.add_argument("--camera", metavar="NAME", help="render what this camera sensor sees, at its "
                     "own size, field of view and clip distances unless overridden")
    ren.add_argument("--from", dest="eye", metavar="X,Y,Z",
                     help="look-at view from this point (negative first number: --from=-2,1,1)")
    ren.add_argument("--to", dest="target", metavar="X,Y,Z", help="... toward this point (up = +z)")
    ren.add_argument("--width", type=int, help=f"pixels, at most {MAX_IMAGE_SIDE} (default 640, or the camera's)")
    ren.add_argument("--height", type=int, help=f"pixels, at most {MAX_IMAGE_SIDE} (default 480, or the camera's)")
    ren.add_argument("--fov", type=float, help="field of view over the shorter side, radians "
                     "(default 0.785, or the camera's)")
    ren.add_argument("--depth", metavar="IMAGE", help="also write the depth image (grey, near = white; .png, .jpg)")
    ren.add_argument("--at", type=float, metavar="T", help="draw the world at time T s of a run: simulated to T "
                     "as `mbsim run` with the same models and flags would, or, with --bag, as recorded")
    ren.add_argument("--bag", metavar="DIR", help="with --at: the links where the bag's /tf puts them at T")
    ren.add_argument("--config", metavar="YAML", help="with --at: the run configuration")
    ren.add_argument("--on-ground", action="store_true", help="with --at: as mbsim run --on-ground")
    ren.add_argument("--no-ground", action="store_true", help="with --at: as mbsim run --no-ground")
    ren.add_argument("--pose", nargs=6, type=float, action="append", metavar=("X", "Y", "Z", "ROLL", "PITCH", "YAW"),
                     help="with --at: as mbsim run --pose")
    _base_options(ren)
    ren.add_argument("--z-up", action="store_true", help=Z_UP_HELP)
    ren.set_defaults(func=cmd_render)
    view = sub.add_parser("view", help="replay a recorded bag in the browser: the robot, TF, images, plots, a time slider")
    view.add_argument("bag", help="a rosbag2 directory written by mbsim run --bag")
    view.add_argument("--view-port", type=int, default=8080, help="the page's port (default 8080, as mbsim run --view)")
    view.add_argument("--view-host", default="127.0.0.1",
                      help="the address to listen on (default 127.0.0.1, this machine only)")
    view.set_defaults(func=cmd_view)
    plot = sub.add_parser("plot", help="plot the IMU, wrench and joint traces of a recorded bag")
    plot.add_argument("bag", help="a rosbag2 directory written by mbsim run --bag")
    plot.add_argument("-o", "--output", required=True, help="the figure to write (.png, .jpg, .pdf, .svg)")
    plot.add_argument("--joints", metavar="NAMES", help="the joints to plot, comma-separated names or "
                      "patterns (e.g. 'LLEG_*,RLEG_KNEE'); default: all, with a legend up to 12")
    plot.set_defaults(func=cmd_plot)
    exp = sub.add_parser("export", help="a recorded bag's camera images as PNG frames or MP4, its numeric "
                                        "topics as CSV tables")
    exp.add_argument("bag", help="a rosbag2 directory written by mbsim run --bag (or ros2 bag record)")
    exp.add_argument("--images", metavar="DIR", help="every image as DIR/<topic>/000000.png ... with stamps.csv "
                     "(depth as grey: white = near)")
    exp.add_argument("--video", metavar="FILE.mp4", help="each image topic as an MP4 video (needs imageio-ffmpeg)")
    exp.add_argument("--csv", metavar="DIR", help="every numeric topic as DIR/<topic>.csv: time, then one column "
                     "per number (joints by name)")
    exp.add_argument("--topics", metavar="NAMES", help="only these topics, comma-separated")
    exp.set_defaults(func=cmd_export)
    bag = sub.add_parser("bag", help="work on a recorded bag")
    bag_sub = bag.add_subparsers(dest="bag_command", required=True)
    repair = bag_sub.add_parser("repair", help="make a bag whose recording was killed readable: keep every "
                                "complete chunk, write the MCAP summary and metadata.yaml")
    repair.add_argument("bag", help="the rosbag2 directory (written by mbsim run --bag or the node)")
    repair.add_argument("--ros-distro", default="jazzy", help="written into metadata.yaml (default jazzy)")
    repair.set_defaults(func=cmd_bag_repair)
    warm = sub.add_parser("warmup", help="compile every numba kernel now, into this installation's cache "
                          "(an install step, a container build, CI), so that no run compiles")
    warm.add_argument("--quiet", action="store_true", help="no progress bar")
    warm.set_defaults(func=cmd_warmup)
    batch = sub.add_parser("batch", help="run a batch of scenarios headless (sweeps, Monte Carlo, regression "
                                         "checks) on a local or an existing Dask cluster")
    from .batch.command import add_arguments as batch_arguments
    batch_arguments(batch)
    batch.set_defaults(func=cmd_batch)
    return p


def cmd_batch(args):
    from .batch.command import main as batch_main
    return batch_main(args)


def one_line_warning(message, category, filename, lineno, line=None):
    """A Python warning as the command's other messages: one line, no source file or code line."""
    kind = "" if category is UserWarning else f"{category.__name__}: "
    return f"warning: {kind}{' '.join(str(message).split())}\n"


def main(argv=None):
    if hasattr(sys.stdout, "reconfigure"):
        # a path that is not UTF-8 (os.fsdecode's surrogates) is written back as the bytes it was,
        # as Python's UTF-8 mode does, not a UnicodeEncodeError traceback on the "wrote ..." line
        sys.stdout.reconfigure(errors="surrogateescape")
    args = build_parser().parse_args(argv)
    from .run.memory import map_large_blocks
    map_large_blocks()      # before rclpy and the bag allocate: see run/memory.py
    if any(x is not None and x <= 0 for x in (getattr(args, "duration", None), getattr(args, "dt", None))):
        print("mbsim: --duration and --dt must be positive", file=sys.stderr)
        return 2
    import warnings
    formatwarning, warnings.formatwarning = warnings.formatwarning, one_line_warning
    try:
        return args.func(args)
    except (ModelError, ConfigError, SimulationError, UsageError, OSError, ImportError) as e:
        print(f"mbsim: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        warnings.formatwarning = formatwarning


if __name__ == "__main__":
    sys.exit(main())
