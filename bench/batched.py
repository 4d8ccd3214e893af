"""Many worlds per call: mb.BatchSimulation against mujoco.rollout, timed side by side in one run.

    python bench/batched.py [--worlds 16 64] [--steps 200] [--repeat 3] [--quick]

Model: the Unitree G1 (29 revolute joints on a floating base, g1_29dof_rev_1_0.urdf from
example-robot-data), loaded by each engine from the same file: mbsim_ros with its floating base
as a free joint, MuJoCo through MjSpec with a free joint added at the pelvis and the collision
meshes kept. Contact is off in both (our contact "none"; MuJoCo's mjDSBL_CONTACT): no ground,
and self-collision is off in both by default. Joint limits are on in both (ours: LCP limit
rows; MuJoCo: its default soft limits); the worlds start in the middle half of their limits.
dt 1 ms, semi-implicit Euler in both (MuJoCo's default Euler).

Each world w gets its own seeded state (base position, orientation and twist, joint angles and
rates) and its own joint torques (held for the rollout; the base unforced): ours as rows of
batch.q, batch.v, batch.tau, MuJoCo's as rollout's initial_state and a qfrc_applied control.
Before timing, one step of every world is taken in both engines and the joint velocities after
it are compared (the accelerations agree, so the models and the state mapping do).

Timed: one call that steps every world `steps` steps from its start state (ours: setting q and
v, then batch.step(steps); MuJoCo: Rollout.rollout with preallocated outputs), best of several
calls; ours on numba's threads (2 = the cores) against a Rollout of 2 threads, and ours on
1 thread against rollout on the calling thread. Ratio = ours / MuJoCo in seconds per world-step
(below 1: ours is faster). The load average is printed beside each repeat: the machine is shared.
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np

G1 = os.path.join(sys.prefix, "lib", f"python{sys.version_info.major}.{sys.version_info.minor}",
                  "site-packages", "cmeel.prefix", "share", "example-robot-data", "robots",
                  "g1_description", "urdf", "g1_29dof_rev_1_0.urdf")
DT = 0.001
GOAL = 1.0          # ours / MuJoCo, seconds per world-step on 2 threads: at most this


def find_g1():
    try:
        import example_robot_data  # noqa: F401  (the cmeel package installs the files only)
    except ImportError:
        pass
    if not os.path.exists(G1):
        raise SystemExit(f"bench/batched.py: {G1} not found; pip install example-robot-data")
    return G1


def load_ours(path):
    import mbsim_ros as mb
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mb.load_model(path, floating_base=True)
    if model.joints[0].type != "free":
        raise SystemExit(f"bench/batched.py: our root joint is {model.joints[0].type!r}, not free")
    return mb, model


def load_mujoco(path, root_name):
    import mujoco
    spec = mujoco.MjSpec.from_file(path)
    spec.meshdir = os.path.join(os.path.dirname(path), "..", "meshes")
    for mesh in spec.meshes:                      # package:// paths: the files are in meshdir
        mesh.file = os.path.basename(mesh.file)
    spec.compiler.discardvisual = True
    spec.compiler.fusestatic = False
    spec.worldbody.first_body().add_freejoint(name=root_name)
    spec.option.timestep = DT
    spec.option.gravity = [0.0, 0.0, -9.80665]
    spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    return mujoco, spec.compile()


def quat_R(x, y, z, w):
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def world_states(model, n, seed):
    """(q (n, nq), v (n, nv), tau (n, nv)) in our conventions: the free base first."""
    rng = np.random.default_rng(seed)
    q, v, tau = np.zeros((n, model.nq)), np.zeros((n, model.nv)), np.zeros((n, model.nv))
    quat = rng.standard_normal((n, 4))
    q[:, :3] = rng.uniform(-1, 1, (n, 3))
    q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    v[:, :6] = 0.5 * rng.standard_normal((n, 6))
    for j in model.joints[1:]:
        if j.nv != 1:
            continue
        lo, hi = float(j.lower[0]), float(j.upper[0])
        q[:, j.q_index] = rng.uniform(lo + 0.25 * (hi - lo), hi - 0.25 * (hi - lo), n)
        v[:, j.v_index] = 0.5 * rng.standard_normal(n)
        tau[:, j.v_index] = rng.uniform(-5, 5, n)
    return q, v, tau


def mujoco_inputs(mujoco, m, model, q, v, tau):
    """rollout's initial_state (n, nstate) and control (n, 1, nv) for our states."""
    n = q.shape[0]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    init = np.zeros((n, mujoco.mj_stateSize(m, spec)))
    ctrl = np.zeros((n, 1, m.nv))
    d = mujoco.MjData(m)
    ours = {j.name: j for j in model.joints}
    for w in range(n):
        mujoco.mj_resetData(m, d)
        for k in range(m.njnt):
            j = ours[m.joint(k).name]
            iq, iv = m.jnt_qposadr[k], m.jnt_dofadr[k]
            if m.jnt_type[k] == mujoco.mjtJoint.mjJNT_FREE:
                qx = q[w, j.q_index:j.q_index + 7]
                d.qpos[iq:iq + 7] = np.r_[qx[:3], qx[6], qx[3:6]]
                d.qvel[iv:iv + 6] = np.r_[quat_R(*qx[3:7]) @ v[w, j.v_index:j.v_index + 3],
                                          v[w, j.v_index + 3:j.v_index + 6]]
            else:
                d.qpos[iq], d.qvel[iv] = q[w, j.q_index], v[w, j.v_index]
                ctrl[w, 0, iv] = tau[w, j.v_index]
        mujoco.mj_getState(m, d, init[w], spec)
    return init, ctrl


def hinge_velocities_agree(mujoco, m, model, batch, q, v, tau, init, ctrl):
    """Max |joint velocity difference| over every world's hinges after one step in each engine."""
    from mujoco import rollout
    batch.q, batch.v, batch.tau = q, v, tau
    batch.step(1)
    state, _ = rollout.rollout(m, mujoco.MjData(m), init, ctrl,
                               control_spec=mujoco.mjtState.mjSTATE_QFRC_APPLIED, nstep=1)
    iv0 = 1 + m.nq                    # FULLPHYSICS: time, qpos, qvel, ...
    ours = {j.name: j for j in model.joints}
    diff = 0.0
    for k in range(m.njnt):
        if m.jnt_type[k] == mujoco.mjtJoint.mjJNT_HINGE:
            j = ours[m.joint(k).name]
            diff = max(diff, np.max(np.abs(state[:, 0, iv0 + m.jnt_dofadr[k]] - batch.v[:, j.v_index])))
    return diff


def best_of(fn, calls):
    fn()                                          # warm-up (thread pools, caches)
    best = np.inf
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--steps", type=int, default=200, help="steps per world per call")
    parser.add_argument("--repeat", type=int, default=3, help="repeats of the whole comparison")
    parser.add_argument("--quick", action="store_true", help="one repeat, fewer calls")
    args = parser.parse_args()
    calls = 2 if args.quick else 5
    repeat = 1 if args.quick else args.repeat

    import numba
    from mujoco import rollout
    path = find_g1()
    mb, model = load_ours(path)
    mujoco, m = load_mujoco(path, model.joints[0].name)
    cores = numba.config.NUMBA_NUM_THREADS
    print(f"bench/batched.py: Unitree G1 ({os.path.basename(path)}), nq {model.nq}, nv {model.nv}; "
          f"MuJoCo {mujoco.__version__} nq {m.nq}, nv {m.nv}; dt {DT} s, contact off in both, joint limits on")
    print(f"{args.steps} steps per world per call; best of {calls} calls; numba threads {cores}; "
          f"ratio = ours / MuJoCo per world-step")
    rows = []
    for n in args.worlds:
        q, v, tau = world_states(model, n, seed=n)
        batch = mb.BatchSimulation(model, n, dt=DT, contact="none")
        init, ctrl = mujoco_inputs(mujoco, m, model, q, v, tau)
        diff = hinge_velocities_agree(mujoco, m, model, batch, q, v, tau, init, ctrl)
        print(f"\n{n} worlds: joint velocities after one step, ours vs MuJoCo: max |diff| {diff:.2e} rad/s "
              f"({'agree' if diff < 1e-6 else 'DISAGREE: timing anyway, read with care'})")
        out_state = np.zeros((n, args.steps, init.shape[1]))
        out_sensor = np.zeros((n, args.steps, 0))
        batch.tau = tau

        def ours():
            batch.q, batch.v = q, v
            batch.step(args.steps)

        def mj(r, datas):
            return lambda: r.rollout(m, datas, init, ctrl, control_spec=mujoco.mjtState.mjSTATE_QFRC_APPLIED,
                                     nstep=args.steps, state=out_state, sensordata=out_sensor)
        for rep in range(repeat):
            load = os.getloadavg()[0]
            per = n * args.steps
            numba.set_num_threads(cores)
            with rollout.Rollout(nthread=cores) as r:
                t_mj = best_of(mj(r, [mujoco.MjData(m) for _ in range(cores)]), calls) / per
            t_ours = best_of(ours, calls) / per
            numba.set_num_threads(1)
            t_ours1 = best_of(ours, calls) / per
            with rollout.Rollout(nthread=0) as r:
                t_mj1 = best_of(mj(r, [mujoco.MjData(m)]), calls) / per
            numba.set_num_threads(cores)
            print(f"  repeat {rep + 1} (load {load:.2f}): {cores} threads ours {t_ours * 1e6:.2f} us, "
                  f"MuJoCo rollout {t_mj * 1e6:.2f} us, ratio {t_ours / t_mj:.2f}x "
                  f"({1 / t_ours:,.0f} vs {1 / t_mj:,.0f} world-steps/s); "
                  f"1 thread ours {t_ours1 * 1e6:.2f} us, MuJoCo {t_mj1 * 1e6:.2f} us, ratio {t_ours1 / t_mj1:.2f}x")
            rows.append((n, t_ours / t_mj, t_ours1 / t_mj1))
    print()
    for n in args.worlds:
        r2 = [r for k, r, _ in rows if k == n]
        r1 = [r for k, _, r in rows if k == n]
        verdict = "met" if min(r2) <= GOAL else "MISSED"
        print(f"{n} worlds: ours / MuJoCo rollout, {cores} threads {min(r2):.2f}-{max(r2):.2f}x "
              f"(goal <= {GOAL:g}x: {verdict}), 1 thread {min(r1):.2f}-{max(r1):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
