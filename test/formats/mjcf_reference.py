"""MuJoCo itself as the ground truth for the MJCF loader: the same file through
mujoco.MjModel.from_xml_path and mb.load_model, compared at random states.

Conventions converted here (architecture.md vs MuJoCo): quaternions (x y z w) vs (w x y z); a
free joint's linear velocity in the body frame vs the world frame. With qvel_mj = T v_ours
(T = R on a free joint's linear block), M_ours = T^T M_mj T, bias_ours = T^T bias_mj, and
qacc_mj = T a_ours + (R (w x v_lin)) on the linear block.
"""
import glob
import os
import sysconfig
import warnings

import numpy as np

import mbsim_ros as mb


def asset_files():
    """Every MJCF model in the installed gymnasium and dm_control packages (sorted)."""
    site = sysconfig.get_paths()["purelib"]
    out = []
    for pkg in ("gymnasium/envs/mujoco/assets", "dm_control"):
        out += glob.glob(os.path.join(site, pkg, "**", "*.xml"), recursive=True)
    return sorted(f for f in out if _is_model(f))


def _is_model(path):
    with open(path, "rb") as f:
        head = f.read(4096)
    return b"<mujoco" in head


def quat_wxyz_to_xyzw(q):
    return np.array([q[1], q[2], q[3], q[0]])


def random_state(model, rng):
    """(q, v) ours at random, and MuJoCo's (qpos, qvel), plus the per-free-joint rotations."""
    q = model.neutral_q().copy()
    v = rng.uniform(-1, 1, model.nv)
    qpos, qvel = [], []
    frees = []
    for j in model.joints:
        a, b = j.q_index, j.v_index
        if j.type in ("revolute", "prismatic"):
            q[a] = rng.uniform(-1.0, 1.0)
            qpos.append(q[a:a + 1])
            qvel.append(v[b:b + 1])
        elif j.type == "ball":
            quat = rng.normal(size=4)
            quat /= np.linalg.norm(quat)
            q[a:a + 4] = quat
            qpos.append([quat[3], *quat[:3]])
            qvel.append(v[b:b + 3])
        elif j.type == "free":
            quat = rng.normal(size=4)
            quat /= np.linalg.norm(quat)
            q[a:a + 3] = rng.uniform(-1, 1, 3)
            q[a + 3:a + 7] = quat
            R = mb.model.transforms.quat_to_matrix(quat)
            qpos.append([*q[a:a + 3], quat[3], *quat[:3]])
            qvel.append(np.concatenate([R @ v[b:b + 3], v[b + 3:b + 6]]))
            frees.append((b, R))
    cat = (lambda x: np.concatenate(x) if x else np.zeros(0))
    return q, v, cat(qpos), cat(qvel), frees


def velocity_map(nv, frees):
    T = np.eye(nv)
    for b, R in frees:
        T[b:b + 3, b:b + 3] = R
    return T


def passive_ours(model, q, v):
    """-K (q - springref) - D v on hinge and slide joints, -D v on the others."""
    tau = np.zeros(model.nv)
    for j in model.joints:
        b = j.v_index
        tau[b:b + j.nv] -= j.damping * v[b:b + j.nv]
        if j.type in ("revolute", "prismatic"):
            tau[b] -= j.stiffness[0] * (q[j.q_index] - j.rest_position[0])
    return tau


def actuators_ours(model, ctrl):
    """Generalized forces of the Model's actuators (all "coordinate") at controls `ctrl`."""
    tau = np.zeros(model.nv)
    names = model.dof_names
    for a, u in zip(model.actuators, ctrl):
        tau[names.index(a.dof)] += a.gain * np.clip(u, a.min_control, a.max_control)
    return tau


def compare(path, states=3, seed=0, m=None):
    """{check: worst relative error} of one file, or raises. Checks: poses (link origins and
    rotations vs xpos/xmat), M, bias, qacc (constraints and actuation off; M (a - a_mj) relative
    to M a_mj), passive (joint springs and dampers, where MuJoCo's passive force is only those:
    no fluid, gravity compensation, tendon springs, ball or free joint springs or springdamper;
    elsewhere qacc takes MuJoCo's passive force)."""
    import mujoco
    m = mujoco.MjModel.from_xml_path(path) if m is None else m
    d = mujoco.MjData(m)
    model = mb.load_model(path)
    assert model.nv == m.nv, f"nv {model.nv} vs MuJoCo {m.nv}"
    assert model.nq == m.nq, f"nq {model.nq} vs MuJoCo {m.nq}"
    gravity = 0 * m.opt.gravity if m.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_GRAVITY) else m.opt.gravity
    assert np.allclose(model.gravity, gravity, rtol=0, atol=1e-15)
    # actuators: ours are all of MuJoCo's (joint transmissions, no activation dynamics, no force
    # clamp on a servo), so their forces join the comparison; else actuation is off on both sides
    # and the passive check is left out (our servos' bias lives in the joint springs)
    actuated = (len(model.actuators) == m.nu and not np.any(m.actuator_dyntype)
                and not np.any(m.actuator_forcelimited.astype(bool) & (m.actuator_biastype != 0)))
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    if not actuated:
        m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_ACTUATION)
    simple_passive = (actuated and not any("springdamper" in w for w in model.warnings) and m.opt.density == 0 and m.opt.viscosity == 0 and not np.any(m.body_gravcomp)
                      and not np.any(m.tendon_stiffness) and not np.any(m.tendon_damping)
                      and not any(j.type in ("ball", "free") and j.stiffness.any() for j in model.joints))
    rng = np.random.default_rng(seed)
    worst = dict(pose=0.0, M=0.0, bias=0.0, qacc=0.0, passive=0.0)
    bodies = {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i) or f"body{i}": i for i in range(1, m.nbody)}
    for _ in range(states):
        q, v, qpos, qvel, frees = random_state(model, rng)
        d.qpos[:], d.qvel[:] = qpos, qvel
        ctrl = rng.uniform(-1.5, 1.5, m.nu)
        if actuated:
            d.ctrl[:] = ctrl
        mujoco.mj_forward(m, d)
        T = velocity_map(m.nv, frees)
        # poses
        poses = mb.link_transforms(model, q)
        for name, i in bodies.items():
            X = poses[name]
            err = max(np.abs(X[:3, 3] - d.xpos[i]).max(), np.abs(X[:3, :3] - d.xmat[i].reshape(3, 3)).max())
            worst["pose"] = max(worst["pose"], err / max(1.0, np.abs(d.xpos[i]).max()))
        M_mj = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, M_mj)
        M = mb.mass_matrix(model, q)
        worst["M"] = max(worst["M"], _rel(M, T.T @ M_mj @ T))
        bias = mb.inverse_dynamics(model, q, v, np.zeros(m.nv))
        c = np.zeros(m.nv)          # d/dt of T: MuJoCo's qacc on a free joint's linear block
        for b, R in frees:
            c[b:b + 3] = R @ np.cross(v[b + 3:b + 6], v[b:b + 3])
        worst["bias"] = max(worst["bias"], _rel(bias, T.T @ (d.qfrc_bias + M_mj @ c)))
        tau_mj = T.T @ (d.qfrc_passive + d.qfrc_actuator)
        if simple_passive:
            tau = passive_ours(model, q, v) + actuators_ours(model, ctrl)
            worst["passive"] = max(worst["passive"], _rel(tau, tau_mj))
        else:
            tau = tau_mj
        a = mb.forward_dynamics(model, q, v, tau)
        a_mj = T @ a + c
        # in force units (M times the difference), so that a badly conditioned M (an insect's
        # grams and millimetres) does not turn MuJoCo's own rounding into a mismatch
        worst["qacc"] = max(worst["qacc"], _rel(M_mj @ a_mj, M_mj @ d.qacc))
    return worst


def _rel(a, b):
    scale = max(np.abs(b).max() if b.size else 0.0, 1e-12)
    return float(np.abs(a - b).max() / scale) if b.size else 0.0


def mujoco_body_pairs(path):
    """The body pairs MuJoCo's collision filters let through (contype/conaffinity, parent and
    weld filters, <exclude>, <pair>), found by MuJoCo itself: every geom made a small sphere
    (planes stay) with a margin beyond any distance in the model, so each pair its filters
    pass gives a contact. Midphase off: its bounding volumes keep the compiled margins."""
    import mujoco
    for memory in (None, 1 << 28):       # MuJoCo's default arena, then room for a big scene's contacts
        pairs = _mujoco_body_pairs(mujoco, path, memory)
        if pairs is not None:
            return pairs
    raise ValueError(f"{path}: MuJoCo's contact buffer filled up: no reference")


def _mujoco_body_pairs(mujoco, path, memory):
    if memory is None:
        m = mujoco.MjModel.from_xml_path(path)
    else:
        spec = mujoco.MjSpec.from_file(path)
        spec.memory = memory
        m = spec.compile()
    plane, sphere = int(mujoco.mjtGeom.mjGEOM_PLANE), int(mujoco.mjtGeom.mjGEOM_SPHERE)
    unsupported = np.isin(m.geom_type, [int(mujoco.mjtGeom.mjGEOM_HFIELD), int(mujoco.mjtGeom.mjGEOM_SDF)])
    m.geom_contype[unsupported] = m.geom_conaffinity[unsupported] = 0     # we leave these out
    ball = m.geom_type != plane
    m.geom_type[ball], m.geom_size[ball, 0], m.geom_rbound[ball] = sphere, 0.01, 0.01
    m.geom_margin[:] = m.pair_margin[:] = 1e3
    m.geom_gap[:] = 0.0
    m.opt.disableflags = int(mujoco.mjtDisableBit.mjDSBL_MIDPHASE)
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    mujoco.mj_collision(m, d)           # contacts only: no constraint rows
    if d.warning[int(mujoco.mjtWarning.mjWARN_CONTACTFULL)].number:
        return None
    names = ["worldbody" if b == 0 else (m.body(b).name or f"body{b}") for b in range(m.nbody)]
    return {frozenset((names[m.geom_bodyid[c.geom1]], names[m.geom_bodyid[c.geom2]])) for c in d.contact[:d.ncon]}


def our_body_pairs(path):
    """The body pairs our collision filters let through (the links carry the body names)."""
    from mbsim_ros.dynamics.collision.geoms import compile_geoms
    from mbsim_ros.dynamics.compiled import compile_models
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mb.load_model(path)
    geoms = compile_geoms([model], compile_models([model]))
    link = [name.rsplit("/", 1)[0] for name in geoms.names]      # a body's geoms are on its link
    return {frozenset((link[i], link[j])) for i, j in geoms.pairs}
