"""Speed of the dynamics core against Pinocchio, MuJoCo and DART, all timed in this one run.

    python bench/dynamics.py [--quick]

Model: SR1.urdf (29 revolute joints) on a floating base, loaded by each engine from the same
file. All engines are put in the same seeded random state (q with a unit quaternion, v, tau,
qdd), given by joint name in Pinocchio's FreeFlyer conventions and mapped into each engine's
own joint order and free-joint convention. Times are per call from Python, the best batch of
several, the batches of all calls taken in turn (common.time_side_by_side), in the thread's
CPU time (time.thread_time: waiting for a core on a busy machine does not count; every call
timed runs on this thread). Ratios are ours / peer; the targets are issue 39's goals. The step
rows compare like with like: no contact in any engine (ours contact="none", MuJoCo's contact
disabled, DART's collision off), and the joint limits enforced in ours and MuJoCo: the timed
batches step for seconds from the random state, and most of those steps have a joint at a
limit (DART does not enforce URDF limits by default: its step does less). The last row steps
both ours and MuJoCo with every joint limit removed (ours: a copy of the model without position
or velocity limits; MuJoCo: mjDSBL_LIMIT): the bare step, like with like again. A missed target or a missing engine is
reported, not raised: the script exits 0.
"""
import argparse
import os
import subprocess
import sys
import time
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from common import print_table, quiet_stderr, time_side_by_side

URDF = "/work/shared/models/urdf/SR1.urdf"
DT = 0.001
GRAVITY = np.array([0.0, 0.0, -9.80665])
SEED = 0
ROOT = "root_joint"            # the free joint's name in our Model, in Pinocchio and in MuJoCo here
# issue 39's goals for the API users call in their own loops: ours / peer at most
FD_TARGET = 1.2                # mb.forward_dynamics / pinocchio.aba
ID_TARGET = 1.2                # mb.inverse_dynamics / pinocchio.rnea
M_TARGET = 1.5                 # mb.mass_matrix / pinocchio.crba
STEP_TARGET = 2.0              # Simulation.step() without contact / DART's World.step
MJ_STEP_TARGET = 1.2           # Simulation.step() without contact / MuJoCo's mj_step
WARM_START_TARGET = 3.0        # seconds from `import mbsim_ros` to the first step, numba cache warm


# --- the bench state -----------------------------------------------------------------------

def random_state(path, seed):
    """{joint name: {"q", "v", "tau", "qdd"}} for the free root and every moving URDF joint.

    The root uses Pinocchio's FreeFlyer convention: q = (px, py, pz, qx, qy, qz, qw), v =
    (linear, angular) in the child frame. Joint positions are drawn in the middle half of
    their limits so that stepping starts well inside them.
    """
    rng = np.random.default_rng(seed)
    quat = rng.standard_normal(4)
    state = {ROOT: dict(q=np.r_[rng.uniform(-1, 1, 3), quat / np.linalg.norm(quat)],
                        v=rng.standard_normal(6), tau=rng.standard_normal(6),
                        qdd=rng.standard_normal(6))}
    for joint in ET.parse(path).getroot().iter("joint"):
        if joint.get("type") == "fixed":
            continue
        limit = joint.find("limit")
        lo, hi = -np.pi, np.pi
        if joint.get("type") != "continuous" and limit is not None:
            lo, hi = float(limit.get("lower", lo)), float(limit.get("upper", hi))
        state[joint.get("name")] = dict(q=np.array([rng.uniform(0.5 * lo, 0.5 * hi)]),
                                        v=rng.standard_normal(1), tau=rng.standard_normal(1),
                                        qdd=rng.standard_normal(1))
    return state


def vectors(joints, nq, nv, state):
    """q, v, tau, qdd in an engine's order; joints = [(name, q_index, v_index, nq, nv)].

    For engines that share Pinocchio's conventions (ours and Pinocchio).
    """
    q, v, tau, qdd = np.zeros(nq), np.zeros(nv), np.zeros(nv), np.zeros(nv)
    for name, iq, iv, jnq, jnv in joints:
        if jnq == 0:
            continue
        s = state[name]
        q[iq:iq + jnq] = s["q"]
        v[iv:iv + jnv], tau[iv:iv + jnv], qdd[iv:iv + jnv] = s["v"], s["tau"], s["qdd"]
    return q, v, tau, qdd


def permutation(joints_from, joints_to, nv):
    """perm such that x_to = x_from[perm] for velocity-sized vectors, matching joints by name."""
    start = {name: iv for name, _, iv, _, _ in joints_from}
    perm = np.zeros(nv, dtype=int)
    for name, _, iv, _, jnv in joints_to:
        perm[iv:iv + jnv] = np.arange(start[name], start[name] + jnv)
    return perm


def rotation(quat_xyzw):
    x, y, z, w = quat_xyzw
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def rotation_vector(quat_xyzw):
    xyz, w = np.asarray(quat_xyzw[:3]), quat_xyzw[3]
    s = np.linalg.norm(xyz)
    return np.zeros(3) if s < 1e-12 else xyz / s * 2.0 * np.arctan2(s, w)


# --- the engines: load SR1 with a floating base ----------------------------------------------

def load_ours():
    import mbsim_ros as mb
    with warnings.catch_warnings(record=True) as caught:     # the loader's notes on SR1
        warnings.simplefilter("always")
        model = mb.load_model(URDF, floating_base=True)
    joints = [(j.name, j.q_index, j.v_index, j.nq, j.nv) for j in model.joints]
    return dict(mb=mb, model=model, joints=joints,
                summary=f"nq {model.nq}, nv {model.nv}, {len(caught)} loader warning(s)")


def load_pinocchio():
    import pinocchio as pin
    with quiet_stderr():                # urdfdom warns about SR1's unnamed/undefined materials
        pmodel = pin.buildModelFromUrdf(URDF, pin.JointModelFreeFlyer())
    pmodel.gravity = pin.Motion(np.r_[GRAVITY, 0.0, 0.0, 0.0])
    joints = [(pmodel.names[i], pmodel.idx_qs[i], pmodel.idx_vs[i], pmodel.nqs[i], pmodel.nvs[i])
              for i in range(1, pmodel.njoints)]
    return dict(pin=pin, model=pmodel, data=pmodel.createData(), joints=joints,
                summary=f"{pin.__version__}, nq {pmodel.nq}, nv {pmodel.nv}")


def load_mujoco(limits=True):
    import mujoco
    spec = mujoco.MjSpec.from_file(URDF)
    spec.compiler.discardvisual = True
    spec.compiler.fusestatic = False
    spec.worldbody.first_body().add_freejoint(name=ROOT)
    spec.option.timestep = DT
    spec.option.gravity = GRAVITY
    spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    if not limits:
        spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_LIMIT
    model = spec.compile()
    return dict(mujoco=mujoco, model=model, data=mujoco.MjData(model),
                summary=f"{mujoco.__version__}, nq {model.nq}, nv {model.nv}, "
                        f"joint limits {'on' if limits else 'off'}, contact off")


def load_dart():
    import dartpy
    loader = dartpy.utils.DartLoader()
    options = dartpy.utils.DartLoaderOptions()
    options.mDefaultRootJointType = dartpy.utils.DartLoaderRootJointType.FLOATING
    loader.setOptions(options)
    with quiet_stderr():
        skel = loader.parseSkeleton(URDF)
    if skel is None:
        raise RuntimeError("DartLoader.parseSkeleton returned no skeleton")
    if skel.getRootJoint().getType() != "FreeJoint":
        raise RuntimeError(f"root joint is a {skel.getRootJoint().getType()}, not a FreeJoint")
    world = dartpy.simulation.World()
    world.setTimeStep(DT)
    world.setGravity(GRAVITY)
    world.addSkeleton(skel)
    # Collisions off: no body is collidable and the world's collision group is emptied
    # (non-collidable bodies alone still cost a broad phase every step).
    for i in range(skel.getNumBodyNodes()):
        skel.getBodyNode(i).setCollidable(False)
    world.getConstraintSolver().getCollisionGroup().removeAllShapeFrames()
    return dict(world=world, skel=skel, summary=f"{getattr(dartpy, '__version__', '?')}, "
                f"{skel.getNumDofs()} DOFs, collision off")


# --- putting the state into MuJoCo and DART --------------------------------------------------

def set_mujoco_state(eng, state):
    """MuJoCo's free joint: qpos = (p, quat w x y z), qvel = (linear in world, angular in body)."""
    mujoco, m, d = eng["mujoco"], eng["model"], eng["data"]
    mujoco.mj_resetData(m, d)
    for j in range(m.njnt):
        s, iq, iv = state[m.joint(j).name], m.jnt_qposadr[j], m.jnt_dofadr[j]
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            p, quat = s["q"][:3], s["q"][3:]
            R = rotation(quat)
            d.qpos[iq:iq + 7] = np.r_[p, quat[3], quat[:3]]
            d.qvel[iv:iv + 6] = np.r_[R @ s["v"][:3], s["v"][3:]]
            d.qfrc_applied[iv:iv + 6] = np.r_[R @ s["tau"][:3], s["tau"][3:]]
        else:
            d.qpos[iq], d.qvel[iv], d.qfrc_applied[iv] = s["q"][0], s["v"][0], s["tau"][0]


def set_dart_state(eng, state):
    """DART 6.20's FreeJoint: positions = (rotation vector, p); velocities = (angular, linear)
    and forces = (torque, force), all in the world frame (measured: the body's spatial velocity
    is R^T times the joint velocities)."""
    skel = eng["skel"]
    for i in range(skel.getNumJoints()):
        joint = skel.getJoint(i)
        if joint.getNumDofs() == 0:
            continue
        if i == 0:
            s = state[ROOT]
            R = rotation(s["q"][3:])
            joint.setPositions(np.r_[rotation_vector(s["q"][3:]), s["q"][:3]])
            joint.setVelocities(np.r_[R @ s["v"][3:], R @ s["v"][:3]])
            joint.setForces(np.r_[R @ s["tau"][3:], R @ s["tau"][:3]])
        else:
            s = state[joint.getName()]
            joint.setPositions(s["q"])
            joint.setVelocities(s["v"])
            joint.setForces(s["tau"])


def dart_joint_accelerations(eng, state):
    """{name: qdd} for DART's one-DOF joints at the state (forward dynamics only, no step)."""
    set_dart_state(eng, state)
    skel = eng["skel"]
    skel.computeForwardDynamics()
    return {skel.getJoint(i).getName(): skel.getJoint(i).getAccelerations()[0]
            for i in range(1, skel.getNumJoints()) if skel.getJoint(i).getNumDofs() == 1}


def mujoco_joint_accelerations(eng, state):
    mujoco, m, d = eng["mujoco"], eng["model"], eng["data"]
    set_mujoco_state(eng, state)
    mujoco.mj_forward(m, d)
    return {m.joint(j).name: d.qacc[m.jnt_dofadr[j]] for j in range(m.njnt)
            if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE}


# --- the run ---------------------------------------------------------------------------------

def try_(what, fn, *args):
    """(result, None) or (None, "reason") so that one failing engine does not stop the rest."""
    try:
        return fn(*args), None
    except Exception as exc:                    # noqa: BLE001 - report any failure and go on
        return None, f"{what}: {type(exc).__name__}: {exc}".splitlines()[0]


def warm_start(runs=2):
    """Seconds from `import mbsim_ros` to the end of the first step, in fresh processes."""
    code = ("import time; t=time.perf_counter(); import mbsim_ros as mb; "
            f"m=mb.load_model({URDF!r}, floating_base=True); s=mb.Simulation(m, dt={DT}); "
            "s.step(); print(time.perf_counter()-t)")
    times = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=900)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip()
                               else f"exit code {out.returncode}")
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return times


def what_to_time(state, ours, pin, mj, dart, notes):
    """{(operation, "ours" | "peer"): (function, args, setup run before each timed batch)}."""
    calls = {}
    if pin is not None:
        p, pm, pd = pin["pin"], pin["model"], pin["data"]
        pq, pv, ptau, pqdd = vectors(pin["joints"], pm.nq, pm.nv, state)
        calls["fd", "peer"] = (p.aba, (pm, pd, pq, pv, ptau), None)
        calls["id", "peer"] = (p.rnea, (pm, pd, pq, pv, pqdd), None)
        calls["m", "peer"] = (p.crba, (pm, pd, pq), None)
    # Steps start from the bench (q, v) with no applied force, before every timed batch.
    unforced = {name: dict(s, tau=np.zeros_like(s["tau"])) for name, s in state.items()}
    if mj is not None:
        calls["step_mj", "peer"] = (mj["mujoco"].mj_step, (mj["model"], mj["data"]),
                                    lambda: set_mujoco_state(mj, unforced))
        free, why = try_("MuJoCo without limits", load_mujoco, False)
        if free is None:
            notes.append(why)
        else:
            calls["step_mj_free", "peer"] = (mj["mujoco"].mj_step, (free["model"], free["data"]),
                                             lambda: set_mujoco_state(free, unforced))
    if dart is not None:
        calls["step_dart", "peer"] = (dart["world"].step, (),
                                      lambda: set_dart_state(dart, unforced))
    if ours is not None:
        mb, model = ours["mb"], ours["model"]
        q, v, tau, qdd = vectors(ours["joints"], model.nq, model.nv, state)
        calls["fd", "ours"] = (mb.forward_dynamics, (model, q, v, tau), None)
        calls["id", "ours"] = (mb.inverse_dynamics, (model, q, v, qdd), None)
        calls["m", "ours"] = (mb.mass_matrix, (model, q), None)
        # the kernels alone, on the API's own compiled arrays: what the API adds is the difference
        from mbsim_ros.dynamics import kernels
        from mbsim_ros.dynamics.api import compiled_for
        c, df, _ = compiled_for(model)
        out, M = np.empty(model.nv), np.zeros((model.nv, model.nv))
        calls["fd_kernel", "ours"] = (kernels.forward_dynamics_kernel, (c.tf, c.ti, df, q, v, tau, out), None)
        calls["id_kernel", "ours"] = (kernels.inverse_dynamics_kernel, (c.tf, c.ti, df, q, v, qdd, out), None)
        calls["m_kernel", "ours"] = (kernels.mass_matrix_kernel, (c.tf, c.ti, df, q, M), None)
        for key, label, stepped in (("step", "mb.Simulation", model),
                                    ("step_free", "mb.Simulation without limits", without_limits(model))):
            sim, why = try_(label, lambda: mb.Simulation(stepped, dt=DT, contact="none"))
            if sim is None:
                notes.append(why)
            else:
                calls[key, "ours"] = (sim.step, (), lambda sim=sim: reset_state(sim, q, v))
    return calls


def reset_state(sim, q, v):
    sim.q[:] = q
    sim.v[:] = v


def without_limits(model):
    """A copy of our model with no position or velocity limit on any joint (as MuJoCo's with
    mjDSBL_LIMIT, which has no velocity limits to begin with)."""
    import copy
    free = copy.deepcopy(model)
    for joint in free.joints:
        for name, value in (("lower", -np.inf), ("upper", np.inf), ("velocity_limit", np.inf)):
            if getattr(joint, name) is not None:
                getattr(joint, name)[:] = value
    return free


def fmt_us(seconds):
    return f"{seconds * 1e6:.2f}" if seconds is not None else "n/a"


def print_results(times):
    """The table: one row per (operation, peer); ratio = ours / peer."""
    rows = []
    for op_ours, op_peer, label, peer, target in (
            ("fd", "fd", "forward dynamics (ABA)", "pinocchio.aba", FD_TARGET),
            ("id", "id", "inverse dynamics (RNEA)", "pinocchio.rnea", ID_TARGET),
            ("m", "m", "mass matrix (CRBA)", "pinocchio.crba", M_TARGET),
            ("fd_kernel", "fd", "ABA kernel alone", "pinocchio.aba", None),
            ("id_kernel", "id", "RNEA kernel alone", "pinocchio.rnea", None),
            ("m_kernel", "m", "CRBA kernel alone", "pinocchio.crba", None),
            ("step", "step_dart", "simulation step", "DART World.step", STEP_TARGET),
            ("step", "step_mj", "simulation step", "MuJoCo mj_step", MJ_STEP_TARGET),
            ("step_free", "step_mj_free", "step, limits off in both", "mj_step, limits off", MJ_STEP_TARGET)):
        t_ours, t_peer = times.get((op_ours, "ours")), times.get((op_peer, "peer"))
        ratio = t_ours / t_peer if t_ours is not None and t_peer is not None else None
        met = "-" if target is None else ("not run" if ratio is None else
                                          ("met" if ratio <= target else "MISSED"))
        rows.append([label, peer, fmt_us(t_ours), fmt_us(t_peer),
                     f"{ratio:.2f}x" if ratio is not None else "n/a",
                     f"<= {target:g}x" if target else "-", met])
    print_table(["operation", "peer", "ours (us)", "peer (us)", "ratio", "target", "result"], rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and shorter batches")
    args = parser.parse_args()
    timing = dict(batches=3, batch_seconds=0.005) if args.quick else dict(batches=9, batch_seconds=0.05)

    state = random_state(URDF, SEED)
    ours, ours_why = try_("mbsim_ros", load_ours)
    pin, pin_why = try_("Pinocchio", load_pinocchio)
    mj, mj_why = try_("MuJoCo", load_mujoco)
    dart, dart_why = try_("DART", load_dart)

    print(f"bench/dynamics.py: {os.path.basename(URDF)} on a floating base, dt = {DT} s, seed {SEED}")
    print(f"timing: per call from Python in thread CPU time, best of {timing['batches']} batches of >= "
          f"{timing['batch_seconds'] * 1e3:g} ms each after warm-up, one batch of every call in "
          "turn; ratio = ours / peer")
    for name, eng, why in (("mbsim_ros", ours, ours_why), ("Pinocchio", pin, pin_why),
                           ("MuJoCo", mj, mj_why), ("DART", dart, dart_why)):
        print(f"  {name}: " + (f"unavailable ({why})" if eng is None else eng["summary"]))
    notes = []

    calls = what_to_time(state, ours, pin, mj, dart, notes)
    for key, (fn, fargs, _) in list(calls.items()):      # a call that fails is left out, with a note
        _, why = try_(f"{key[1]} {key[0]}", fn, *fargs)
        if why:
            notes.append(why)
            del calls[key]
    times = time_side_by_side(calls, clock=time.thread_time, **timing)

    print()
    print(f"load average (1 min) after timing: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print_results(times)

    print()
    print("sanity at the bench state (ours vs Pinocchio, max abs difference):")
    if ours is None or pin is None:
        print("  not run: needs both mbsim_ros and Pinocchio")
    else:
        _sanity(ours, pin, state)
    print("peers vs Pinocchio on the 29 joint accelerations (same state loaded everywhere):")
    _peer_agreement(pin, mj, dart, state)

    print()
    if ours is None:
        print(f"warm start: not run ({ours_why})")
    else:
        starts, why = try_("warm start", warm_start)
        if starts is None:
            print(f"warm start: failed ({why})")
        else:
            verdict = "met" if starts[-1] < WARM_START_TARGET else "MISSED"
            print(f"warm start (fresh process, import to end of first step): run 1 {starts[0]:.2f} s "
                  f"(cold only if the numba cache was empty), run 2 (cache warm) {starts[1]:.2f} s; "
                  f"target < {WARM_START_TARGET:g} s: {verdict}")
    for note in notes:
        print(f"note: {note}")
    return 0


def _sanity(ours, pin, state):
    mb, model = ours["mb"], ours["model"]
    p, pm, pd = pin["pin"], pin["model"], pin["data"]
    saved = pm.gravity.copy()
    pm.gravity = p.Motion(np.r_[np.asarray(model.gravity, dtype=float), 0.0, 0.0, 0.0])
    q, v, tau, qdd = vectors(ours["joints"], model.nq, model.nv, state)
    pq, pv, ptau, pqdd = vectors(pin["joints"], pm.nq, pm.nv, state)
    perm = permutation(pin["joints"], ours["joints"], model.nv)     # ours = pinocchio[perm]
    checks = (
        ("forward dynamics", lambda: mb.forward_dynamics(model, q, v, tau),
         lambda: p.aba(pm, pd, pq, pv, ptau)[perm]),
        ("inverse dynamics", lambda: mb.inverse_dynamics(model, q, v, qdd),
         lambda: p.rnea(pm, pd, pq, pv, pqdd)[perm]),
        ("mass matrix", lambda: mb.mass_matrix(model, q),
         lambda: _symmetric(p.crba(pm, pd, pq))[np.ix_(perm, perm)]),
    )
    for label, f_ours, f_pin in checks:
        diff, why = try_(label, lambda: np.max(np.abs(np.asarray(f_ours()) - f_pin())))
        print(f"  {label}: " + (why if diff is None else f"{diff:.3g}"))
    pm.gravity = saved


def _symmetric(upper):
    upper = np.array(upper)
    return np.triu(upper) + np.triu(upper, 1).T


def _peer_agreement(pin, mj, dart, state):
    if pin is None:
        print("  not run: needs Pinocchio")
        return
    p, pm, pd = pin["pin"], pin["model"], pin["data"]
    pq, pv, ptau, _ = vectors(pin["joints"], pm.nq, pm.nv, state)
    a = p.aba(pm, pd, pq, pv, ptau)
    reference = {name: a[iv] for name, _, iv, _, nv in pin["joints"] if nv == 1}
    for name, eng, fn in (("MuJoCo", mj, mujoco_joint_accelerations),
                          ("DART", dart, dart_joint_accelerations)):
        if eng is None:
            continue
        acc, why = try_(name, fn, eng, state)
        if acc is None:
            print(f"  {name}: {why}")
        else:
            diff = max(abs(acc[n] - reference[n]) for n in reference)
            print(f"  {name}: {diff:.3g} (rad/s^2)")


if __name__ == "__main__":
    sys.exit(main())
