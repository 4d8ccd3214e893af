"""`mbsim warmup`: compile every numba kernel ahead of time, into the kernel cache of this
installation (for an install step, a container build, CI), so that no later run, sim_node start
or Simulation() compiles.

A world's kernels differ only by what the world has, not by its sizes (they take flat buffers):
the integrator (semi-implicit Euler or RK4), force elements or none (forces.forces_or_none),
penalty contact or not, and the sensor kinds. So a few small worlds call every kernel: the
bundled SR1 world (every sensor kind, LCP contact) bare and as `mbsim run` makes it, a slider
with a spring and a force sensor (force elements), a slider with penalty contact, each with both
integrators, the Python API's functions on SR1, the TF message kernel and the bag's.

numba compiles on the CPU and holds the GIL, so the groups compile in processes, one per core.
Kernels that call others share those callees (ABA, contact, constraints): a group that needs the
step kernel's callees waits for the group that compiles them (`after`), else two processes would
compile the same callees at once. Progress and the ETA count CPU seconds: each group's cost as
measured on its last cold compile here (stored beside the cache), else the table below.
"""
import json
import os
import time
import warnings
from dataclasses import dataclass

import numpy as np

STEP = "world step and link poses (LCP contact, semi-implicit Euler)"
RUN = "mbsim run's world: hold springs, sensors, overlap check"


@dataclass(frozen=True)
class Group:
    name: str
    call: object            # a module-level function (it runs in a worker process)
    cost: float             # CPU seconds of a cold compile (measured; see COSTS_FILE)
    after: tuple = ()       # groups whose callees this one calls: compiled first


def _world():
    from .run.world import DEFAULT_WORLD, load_models
    return load_models(DEFAULT_WORLD)[0]


def _slider(spring: bool):
    """One body on a prismatic joint, with a spring to the world or without; a force sensor."""
    from .model import Joint, Link, Model, Sensor, SpringDamper
    m = Model("warmup_slider", gravity=(0.0, 0.0, -9.80665))
    m.add_link(Link("body", 1.0, [0, 0, 0], np.eye(3) * 0.1))
    m.add_joint(Joint("x", "prismatic", None, "body", axis=[1, 0, 0]))
    m.sensors.append(Sensor("force", "force", "body"))
    if spring:
        m.forces.append(SpringDamper("spring", None, np.array([-1.0, 0, 0]), "body", np.zeros(3),
                                     free_length=1.0, stiffness=10.0))
    return m.finalize()


def world_step():
    from .dynamics import Physics
    Physics(_world())


def run_world():
    """The bundled world as `mbsim run` makes it: hold springs, sensors, the overlap check, the
    TF and bag kernels."""
    from .dynamics.placement import overlaps
    from .ros.bridge import WARM_UP_JOBS
    from .run import load_config, load_world, build_simulation
    config = load_config(None, {})
    models, _ = load_world(config)
    sim = build_simulation(models, config, warm_up_jobs=WARM_UP_JOBS)
    # the start check's collision kernel, for worlds whose models start inside each other (this
    # world's own start never calls it); min_depth -inf lets every pair through to it
    overlaps(sim, min_depth=-np.inf)


def rendering():
    from .render import cast_rays, render, world_scene
    scene = world_scene(_world())
    render(scene, np.eye(4), 2, 2, 1.0, 0.1, 10.0)
    cast_rays(scene, np.zeros((1, 3)), np.array([[0.0, 0.0, 1.0]]), 1.0)


def rk4_step():
    import mbsim_ros as mb
    mb.Simulation(_slider(False), integrator="rk4", contact="none")


def force_elements():
    import mbsim_ros as mb
    sim = mb.Simulation(_slider(True))
    sim.applied_forces()
    sim.sense(sim.q, sim.v, np.zeros(sim.nv))


def force_elements_rk4():
    import mbsim_ros as mb
    mb.Simulation(_slider(True), integrator="rk4", contact="none")


def penalty_contact():
    import mbsim_ros as mb
    mb.Simulation(_slider(False), contact="penalty")


def penalty_contact_rk4():
    import mbsim_ros as mb
    mb.Simulation(_slider(False), integrator="rk4", contact="penalty")


def python_api():
    import mbsim_ros as mb
    model = _world()[0]
    q, v = model.initial_q(), np.zeros(model.nv)
    mb.forward_dynamics(model, q, v, np.zeros(model.nv))
    mb.inverse_dynamics(model, q, v, np.zeros(model.nv))
    mb.mass_matrix(model, q)
    mb.link_transforms(model, q)
    mb.link_velocities(model, q, v)
    mb.link_accelerations(model, q, v, np.zeros(model.nv))
    mb.frame_jacobian(model, q, model.links[-1].name)
    mb.center_of_mass(model, q)
    mb.integrate(model, q, v, 0.001)


def ros_messages():
    from .ros import bag_kernels, templates
    templates.compile_tf_kernels()
    bag_kernels.compile_lane_kernels()


# CPU seconds of each group compiled cold, as one warm-up measured them with the others compiling
# beside it (python -m mbsim_ros.cli warmup on a fresh MBSIM_CACHE_DIR stores its own in
# COSTS_FILE, which replace these); they set the progress's weights, the ETA follows the rate.
GROUPS = [
    Group(STEP, world_step, 131.0),
    Group("camera rendering and range ray casting", rendering, 41.0),
    Group("TF and bag messages", ros_messages, 9.0),
    Group(RUN, run_world, 13.0, after=(STEP,)),
    Group("RK4 step", rk4_step, 16.0, after=(STEP,)),
    Group("force elements", force_elements, 76.0, after=(STEP,)),
    Group("force elements, RK4 step", force_elements_rk4, 20.0, after=(STEP, "RK4 step", "force elements")),
    Group("penalty contact", penalty_contact, 19.0, after=(STEP,)),
    Group("penalty contact, RK4 step", penalty_contact_rk4, 16.0, after=(STEP, "RK4 step", "penalty contact")),
    Group("Python API", python_api, 18.0, after=(STEP,)),
]

COSTS_FILE = "warmup-cpu-seconds.json"      # beside the kernel caches: {group: CPU s} of the last cold compile


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def expected_costs(groups, root):
    """{name: CPU s}: the stored measurements where there are, else the table's."""
    try:
        stored = json.loads((root / COSTS_FILE).read_text())
    except (OSError, ValueError):
        stored = {}
    return {g.name: float(stored.get(g.name, g.cost)) for g in groups}


@dataclass
class Progress:
    """What a warm-up's progress shows: fraction done (by CPU seconds), the ETA in seconds,
    the groups compiling now, numba functions compiled so far."""
    fraction: float
    eta: float
    running: list
    functions: int
    done: int
    groups: int


def warm_up_everything(progress=None, groups=None, workers=None, poll=0.5):
    """Compile `groups` (default: every kernel group) in `workers` processes (default: one per
    core). progress(Progress) is called at least every `poll` seconds. Returns
    {name: (CPU s, functions compiled)}; raises RuntimeError naming a group that failed."""
    import multiprocessing
    import queue

    from ._kernel_cache import cache_root
    groups = list(GROUPS if groups is None else groups)
    root = cache_root()
    costs = expected_costs(groups, root)
    names = {g.name for g in groups}
    pending = sorted(groups, key=lambda g: -costs[g.name])      # longest first, as they become ready
    workers = max(1, min(workers or cores(), len(groups)))
    context = multiprocessing.get_context("spawn")               # numba's LLVM state is not fork-safe
    tasks, results = context.Queue(), context.Queue()
    procs = [context.Process(target=_worker, args=(tasks, results), daemon=True) for _ in range(workers)]
    for p in procs:
        p.start()
    idle, done, running, functions = 0, {}, {}, 0          # running: name -> (pid, CPU s at its start)
    cpu_seen = {}                                           # pid -> CPU s at the last poll
    rate, t_last = float(workers), time.monotonic()        # CPU s compiled per wall second
    try:
        while pending or running:
            while idle and pending:
                ready = [g for g in pending if all(a in done or a not in names for a in g.after)]
                if not ready:
                    break
                pending.remove(ready[0])
                tasks.put(ready[0].call)
                running[ready[0].name] = None
                idle -= 1
            try:
                message = results.get(timeout=poll)
            except queue.Empty:
                message = None
            if message is not None:
                kind = message[0]
                if kind == "idle":
                    idle += 1
                elif kind == "start":
                    _, call, pid, cpu0 = message
                    running[_name(groups, call)] = (pid, cpu0)
                elif kind == "function":
                    functions += 1
                elif kind == "done":
                    _, call, cpu, compiled = message
                    name = _name(groups, call)
                    running.pop(name)
                    done[name] = (cpu, compiled)
                    idle += 1
                elif kind == "error":
                    raise RuntimeError(f"warm-up of {_name(groups, message[1])} failed: {message[2]}")
            if not any(p.is_alive() for p in procs):
                raise RuntimeError("the warm-up's worker processes ended unexpectedly")
            # CPU seconds done: finished groups at their cost, running ones at what they used so far
            cpu_now = {s[0]: _process_cpu(s[0], s[1]) for s in running.values() if s}
            used = left = 0.0
            for name, cost in costs.items():
                state = running.get(name)
                if name in done:
                    used += cost
                elif state:
                    spent = cpu_now[state[0]] - state[1]
                    used += min(spent, cost)
                    left += max(cost - spent, 0.05 * cost)      # a group past its cost: nearly done
                else:
                    left += cost
            now = time.monotonic()
            if now - t_last >= poll:
                # CPU seconds per wall second across the workers, smoothed: the share of the
                # machine this warm-up gets (a shared machine gives it less than its cores)
                gained = sum(max(c - cpu_seen.get(pid, c), 0.0) for pid, c in cpu_now.items())
                if cpu_seen:
                    rate = 0.8 * rate + 0.2 * max(gained / (now - t_last), 0.05)
                cpu_seen, t_last = cpu_now, now
            if progress is not None:
                progress(Progress(used / (used + left) if used + left else 1.0, left / rate,
                                  [n for n, s in running.items() if s], functions, len(done), len(groups)))
        for _ in procs:
            tasks.put(None)
        for p in procs:
            p.join(timeout=10)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
    compiled = {name: cpu for name, (cpu, n) in done.items() if n}
    if compiled:                   # a cold compile's own costs, for the next warm-up's ETA
        try:
            root.mkdir(parents=True, exist_ok=True)
            stored = expected_costs([g for g in GROUPS if g.name not in compiled], root)
            stored.update(compiled)
            (root / COSTS_FILE).write_text(json.dumps(stored, indent=1))
        except OSError:
            pass
    return done


def _name(groups, call):
    return next(g.name for g in groups if g.call.__module__ == call.__module__ and g.call.__qualname__ == call.__qualname__)


def _process_cpu(pid, default):
    """User + system CPU seconds of process pid (Linux /proc), else `default`."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return default


def _worker(tasks, results):
    """A warm-up process: run the groups it is handed, report each function numba compiles."""
    from numba.core import event

    from ._kernel_cache import CompileReport, compile_report

    class Quiet(CompileReport):          # the parent shows the progress
        def started(self):
            pass

        def finished(self):
            pass

    class Count(event.Listener):
        def on_start(self, ev):
            counted[0] += 1
            results.put(("function",))

        def on_end(self, ev):
            pass

    counted = [0]
    event.register("numba:compile", Count())
    warnings.simplefilter("ignore")          # the models' notes: the warm-up compiles, it does not run them
    results.put(("idle",))
    while True:
        call = tasks.get()
        if call is None:
            return
        cpu0, n0 = _process_cpu(os.getpid(), time.process_time()), counted[0]
        results.put(("start", call, os.getpid(), cpu0))
        try:
            with compile_report(Quiet()):
                call()
        except Exception as e:     # noqa: BLE001 (named to the parent, which stops the warm-up)
            results.put(("error", call, f"{type(e).__name__}: {e}"))
            return
        results.put(("done", call, _process_cpu(os.getpid(), time.process_time()) - cpu0, counted[0] - n0))
