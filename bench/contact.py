"""Speed of a contact simulation step against MuJoCo: SR1 standing on a ground plane, one run.

    python bench/contact.py [--quick]

Model: SR1.urdf on a floating base (its collision boxes and cylinders), loaded by each engine
from the same file, plus a ground plane: in mbsim_ros a second Model with a plane welded to the
world and `Simulation([robot, ground], dt=1 ms)` (contact "lcp", the default); in MuJoCo a plane
geom added to the worldbody through `MjSpec` (free joint added as in bench/dynamics.py). Both
keep their default contact solver settings (MuJoCo: pyramidal cone, Newton, soft contacts;
ours: DART-style boxed LCP), joint limits on, gravity 9.80665 and sliding friction 1.0 in both
(all shapes' default: ours takes the smaller of a pair, MuJoCo the larger). Our loader leaves
SR1's self-collision off, so MuJoCo's robot geoms are given conaffinity 0: in both engines the
robot collides with the ground only.

Both robots start at the URDF's zero joint pose, upright, with the root raised so that the
lowest point of the collision geometry (computed from each engine's own geometry) just touches
the ground. Every joint is held by the same PD torques, tau = kp (q0 - q) - kd v, recomputed
every step from Python with the same numpy expression in both engines (ours: into sim.tau;
MuJoCo: into data.qfrc_applied). After 1 s of settling, both must still stand (root height
within 1 cm of the start; for ours, the summed contact normal forces within 5 % of the weight).
Then "PD update + one step" is timed from the settled state (restored before every timed batch;
see common.time_per_call), so the same Python overhead is in both times; the PD update alone is
timed too. Ratio = ours / MuJoCo; real-time factor = dt / our step time. A missed target, a
fallen robot or a missing engine is reported, not raised: the script exits 0.
"""
import argparse
import collections
import os
import sys
import warnings

import numpy as np

from common import print_table, time_per_call

URDF = "/work/shared/models/urdf/SR1.urdf"
DT = 0.001
GRAVITY = np.array([0.0, 0.0, -9.80665])
ROOT = "root_joint"            # the free joint's name in our Model and in MuJoCo here
FRICTION = 1.0                 # sliding friction of every shape, hence of every pair, in both
KP, KD = 2000.0, 20.0          # the PD holding every joint at the zero pose (N m/rad, N m s/rad)
SETTLE = 1.0                   # seconds of settling before the checks and the timing
HEIGHT_TOL = 0.01              # standing: root height within 1 cm of the start
FORCE_TOL = 0.05               # standing (ours): contact normal forces within 5 % of the weight
RATIO_TARGET = 5.0             # ours within 5x of MuJoCo's mj_step
RTF_TARGET = 10.0              # real-time factor above 10 at dt = 1 ms


# --- geometry: the lowest point of a shape -----------------------------------------------------

def lowest_z(kind, T, size=None, radius=0.0, length=0.0, vertices=None):
    """World z of the lowest point of a shape at world pose T (4x4); None for a plane.

    size: box full lengths; radius and length (along the shape's z) for cylinders, capsules,
    cones (bounded by the cylinder around them); vertices in the shape frame for meshes."""
    R, c = T[:3, :3], T[:3, 3]
    if kind == "box":
        return c[2] - np.abs(R[2]) @ (0.5 * np.asarray(size))
    if kind == "sphere":
        return c[2] - radius
    if kind in ("cylinder", "cone"):
        az = abs(R[2, 2])
        return c[2] - radius * np.sqrt(max(0.0, 1.0 - az * az)) - 0.5 * length * az
    if kind == "capsule":
        return c[2] - 0.5 * length * abs(R[2, 2]) - radius
    if kind == "mesh" and vertices is not None and len(vertices):
        return float(np.min(np.asarray(vertices) @ R[2] + c[2]))
    return None


# --- the engines ---------------------------------------------------------------------------

def load_ours():
    """SR1 plus a ground plane in one mbsim_ros Simulation, at the touching zero pose."""
    import mbsim_ros as mb
    from mbsim_ros.model import Joint, Link, Model, Shape
    with warnings.catch_warnings(record=True):            # the loader's notes on SR1
        warnings.simplefilter("always")
        robot = mb.load_model(URDF, floating_base=True)
    if robot.joints[0].type != "free" or robot.joints[0].q_index != 0:
        raise RuntimeError(f"the root joint is {robot.joints[0].type!r}, not the first free joint")
    if not np.allclose(robot.gravity, GRAVITY):
        raise RuntimeError(f"the model's gravity is {robot.gravity}, not {GRAVITY}")
    ground = Model("ground")
    ground.add_link(Link("ground", collisions=[Shape("plane", friction=FRICTION)]))
    ground.add_joint(Joint("ground_weld", "fixed", None, "ground"))
    ground.finalize()

    # Lowest collision point at the zero pose with the root at the origin.
    q = robot.neutral_q()
    transforms = mb.link_transforms(robot, q)
    lows = [lowest_z(s.kind, transforms[link.name] @ s.pose, s.size, s.radius, s.length, s.vertices)
            for link in robot.links for s in link.collisions]
    lows = [z for z in lows if z is not None]
    if not lows:
        raise RuntimeError("SR1 has no collision geometry in our loader")
    q[2] = -min(lows)

    sim = mb.Simulation([robot, ground], dt=DT)
    sim.q[:] = np.r_[q, np.zeros(sim.nq - robot.nq)]
    sim.v[:] = 0.0
    shapes = collections.Counter(s.kind for link in robot.links for s in link.collisions)
    return dict(mb=mb, robot=robot, sim=sim, z0=q[2], mass=robot.total_mass,
                summary=f"nq {sim.nq}, nv {sim.nv}, collision shapes "
                        + ", ".join(f"{n} {k}" for k, n in sorted(shapes.items()))
                        + f", contact {sim.contact!r}, self-collision {robot.self_collision}")


def load_mujoco():
    """The same URDF in MuJoCo with a free joint and a ground plane, at the touching zero pose."""
    import mujoco
    spec = mujoco.MjSpec.from_file(URDF)
    spec.compiler.discardvisual = True
    spec.compiler.fusestatic = False
    spec.worldbody.first_body().add_freejoint(name=ROOT)
    spec.option.timestep = DT
    spec.option.gravity = GRAVITY
    for geom in spec.geoms:                 # the robot touches the ground only (see above)
        geom.contype, geom.conaffinity = 1, 0
        geom.friction = [FRICTION, geom.friction[1], geom.friction[2]]
    plane = spec.worldbody.add_geom(name="ground", type=mujoco.mjtGeom.mjGEOM_PLANE,
                                    size=[0.0, 0.0, 1.0])
    plane.contype, plane.conaffinity = 1, 1
    plane.friction = [FRICTION, plane.friction[1], plane.friction[2]]
    model = spec.compile()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)          # root at the origin, zero joint pose
    lows = []
    for g in range(model.ngeom):
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = data.geom_xmat[g].reshape(3, 3), data.geom_xpos[g]
        s, kind = model.geom_size[g], mujoco.mjtGeom(model.geom_type[g])
        z = {mujoco.mjtGeom.mjGEOM_BOX: lambda: lowest_z("box", T, size=2 * s),
             mujoco.mjtGeom.mjGEOM_SPHERE: lambda: lowest_z("sphere", T, radius=s[0]),
             mujoco.mjtGeom.mjGEOM_CYLINDER: lambda: lowest_z("cylinder", T, radius=s[0], length=2 * s[1]),
             mujoco.mjtGeom.mjGEOM_CAPSULE: lambda: lowest_z("capsule", T, radius=s[0], length=2 * s[1]),
             }.get(kind, lambda: None)()
        if z is not None:
            lows.append(z)
    data.qpos[2] = -min(lows)
    mujoco.mj_forward(model, data)
    kinds = collections.Counter(mujoco.mjtGeom(t).name[len("mjGEOM_"):].lower()
                                for t in model.geom_type[1:] if t != mujoco.mjtGeom.mjGEOM_PLANE)
    cone = "pyramidal" if model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL else "elliptic"
    return dict(mujoco=mujoco, model=model, data=data, z0=data.qpos[2],
                mass=float(np.sum(model.body_mass)),
                summary=f"{mujoco.__version__}, nq {model.nq}, nv {model.nv}, geoms "
                        + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
                        + f", {cone} cone, solver {mujoco.mjtSolver(model.opt.solver).name[len('mjSOL_'):]}"
                        + f", {int(model.jnt_limited.sum())} limited joints")


# --- the controlled step in each engine: PD update then one step -------------------------------

def ours_step_fn(eng):
    """PD torques from the current state into sim.tau, then sim.step(): the timed call."""
    sim = eng["sim"]
    qj, vj, tj = sim.q[7:eng["robot"].nq], sim.v[6:eng["robot"].nv], sim.tau[6:eng["robot"].nv]
    q0j, step = np.zeros_like(qj), sim.step

    def pd():
        tj[:] = KP * (q0j - qj) - KD * vj

    def controlled_step():
        tj[:] = KP * (q0j - qj) - KD * vj
        step()
    return controlled_step, pd


def mujoco_step_fn(eng):
    """The same PD expression into data.qfrc_applied, then mj_step: the timed call."""
    m, d, mj_step = eng["model"], eng["data"], eng["mujoco"].mj_step
    qj, vj, tj = d.qpos[7:], d.qvel[6:], d.qfrc_applied[6:]
    q0j = np.zeros_like(qj)

    def pd():
        tj[:] = KP * (q0j - qj) - KD * vj

    def controlled_step():
        tj[:] = KP * (q0j - qj) - KD * vj
        mj_step(m, d)
    return controlled_step, pd


def tilt_deg(quat_xyzw):
    """Angle in degrees between the root's z axis and the world's."""
    x, y = quat_xyzw[0], quat_xyzw[1]
    return float(np.degrees(np.arccos(np.clip(1.0 - 2.0 * (x * x + y * y), -1.0, 1.0))))


def by_link(names):
    counts = collections.Counter(names)
    return ", ".join(f"{name} x{n}" for name, n in sorted(counts.items()))


def settle_ours(eng, notes):
    """1 s of PD-held standing; returns the settled state and what was seen there."""
    sim = eng["sim"]
    fn, _ = ours_step_fn(eng)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(int(round(SETTLE / DT))):
            fn()
    for w in caught:
        notes.append(f"ours, settling: {w.category.__name__}: {w.message}")
    contacts = sim.contacts()
    stats = sim.stats()
    weight = eng["mass"] * np.linalg.norm(GRAVITY)
    normal = float(sum(np.dot(c.force, c.normal) for c in contacts))
    robot_link = lambda c: c.link_a if c.link_b == "ground" else c.link_b
    out = dict(height=sim.q[2], tilt=tilt_deg(sim.q[3:7]), ncon=stats["contacts"],
               rows=stats["rows"], stats=stats, normal=normal, weight=weight,
               links=by_link(robot_link(c) for c in contacts),
               depth=max((c.depth for c in contacts), default=0.0),
               state=(sim.q.copy(), sim.v.copy(), sim.tau.copy()))
    out["standing"] = (abs(out["height"] - eng["z0"]) <= HEIGHT_TOL
                       and abs(normal - weight) <= FORCE_TOL * weight)
    return out


def settle_mujoco(eng):
    mujoco, m, d = eng["mujoco"], eng["model"], eng["data"]
    fn, _ = mujoco_step_fn(eng)
    for _ in range(int(round(SETTLE / DT))):
        fn()
    f = np.zeros(6)
    normal = 0.0
    for i in range(d.ncon):
        mujoco.mj_contactForce(m, d, i, f)
        normal += f[0]
    links = []
    for c in d.contact[:d.ncon]:
        g = c.geom[0] if m.geom_bodyid[c.geom[0]] != 0 else c.geom[1]
        links.append(m.body(m.geom_bodyid[g]).name)
    limit_rows = int(np.sum(d.efc_type[:d.nefc] == mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT))
    out = dict(height=d.qpos[2], tilt=tilt_deg(np.r_[d.qpos[4:7], d.qpos[3]]), ncon=d.ncon,
               rows=d.nefc, limit_rows=limit_rows, normal=normal,
               weight=eng["mass"] * np.linalg.norm(GRAVITY), links=by_link(links),
               depth=max((-c.dist for c in d.contact[:d.ncon]), default=0.0),
               state=(d.qpos.copy(), d.qvel.copy(), d.qacc_warmstart.copy(), d.qfrc_applied.copy()))
    out["standing"] = abs(out["height"] - eng["z0"]) <= HEIGHT_TOL
    return out


# --- the run ---------------------------------------------------------------------------------

def try_(what, fn, *args):
    """(result, None) or (None, "reason") so that one failing engine does not stop the rest."""
    try:
        return fn(*args), None
    except Exception as exc:                    # noqa: BLE001 - report any failure and go on
        return None, f"{what}: {type(exc).__name__}: {exc}".splitlines()[0]


def time_ours(eng, settled, timing, notes):
    sim = eng["sim"]
    q, v, tau = settled["state"]
    fn, pd = ours_step_fn(eng)

    def restore():
        sim.q[:], sim.v[:], sim.tau[:] = q, v, tau
    restore()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t_step = time_per_call(fn, setup=restore, **timing)
    for w in caught:
        notes.append(f"ours, timing: {w.category.__name__}: {w.message}")
    t_pd = time_per_call(pd, **timing)
    after = dict(height=sim.q[2], stats=sim.stats())
    restore()
    return t_step, t_pd, after


def time_mujoco(eng, settled, timing):
    d = eng["data"]
    qpos, qvel, warm, frc = settled["state"]

    def restore():
        d.qpos[:], d.qvel[:], d.qacc_warmstart[:], d.qfrc_applied[:] = qpos, qvel, warm, frc
    restore()
    fn, pd = mujoco_step_fn(eng)
    t_step = time_per_call(fn, setup=restore, **timing)
    t_pd = time_per_call(pd, **timing)
    after = dict(height=d.qpos[2])
    restore()
    return t_step, t_pd, after


def fmt_us(seconds):
    return f"{seconds * 1e6:.1f}" if seconds is not None else "n/a"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and shorter batches")
    args = parser.parse_args()
    timing = dict(batches=3, batch_seconds=0.005) if args.quick else dict(batches=9, batch_seconds=0.05)

    mj, mj_why = try_("MuJoCo", load_mujoco)
    ours, ours_why = try_("mbsim_ros", load_ours)

    print(f"bench/contact.py: {os.path.basename(URDF)} (floating) standing on a ground plane, "
          f"dt = {DT} s, PD kp {KP:g} kd {KD:g} on every joint, {SETTLE:g} s settling")
    print(f"timing: PD update + one step per call from Python (same numpy PD in both), best of "
          f"{timing['batches']} batches of >= {timing['batch_seconds'] * 1e3:g} ms each after "
          "warm-up, from the settled state; ratio = ours / MuJoCo")
    for name, eng, why in (("mbsim_ros", ours, ours_why), ("MuJoCo", mj, mj_why)):
        print(f"  {name}: " + (f"unavailable ({why})" if eng is None else eng["summary"]))
    notes = []

    settled = {}
    for name, eng, fn in (("ours", ours, lambda e: settle_ours(e, notes)),
                          ("MuJoCo", mj, settle_mujoco)):
        if eng is not None:
            settled[name], why = try_(f"{name} settling", fn, eng)
            if why:
                notes.append(why)
    if ours is not None and mj is not None and abs(ours["z0"] - mj["z0"]) > 1e-4:
        notes.append(f"start heights differ: ours {ours['z0']:.5f} m, MuJoCo {mj['z0']:.5f} m "
                     "(the same URDF geometry should give the same lowest point)")

    print()
    print(f"settled state after {SETTLE:g} s (standing: root height within {HEIGHT_TOL * 100:g} cm "
          f"of the start; ours also needs contact normal forces within {FORCE_TOL:.0%} of the weight):")
    rows = []
    for name, eng in (("ours", ours), ("MuJoCo", mj)):
        s = settled.get(name)
        if s is None:
            rows.append([name] + ["n/a"] * 8)
            continue
        rows_txt = str(s["rows"]) + (f" ({s['limit_rows']} limit)" if "limit_rows" in s else "")
        rows.append([name, f"{eng['z0']:.4f}", f"{s['height']:.4f}", f"{s['tilt']:.2f}",
                     str(s["ncon"]), rows_txt, f"{s['normal']:.1f} / {s['weight']:.1f}",
                     f"{s['depth'] * 1e3:.3f}", "yes" if s["standing"] else "NO"])
    print_table(["engine", "start z (m)", "root z (m)", "tilt (deg)", "contacts", "rows",
                 "normal force / weight (N)", "max depth (mm)", "standing"], rows)
    for name in ("ours", "MuJoCo"):
        if name in settled:
            print(f"  {name} contacts by robot link: {settled[name]['links'] or 'none'}")
    if "ours" in settled:
        st = settled["ours"]["stats"]
        print(f"  ours solver: lcp_status {st['lcp_status']} (0 Dantzig, 1 PGS fallback, "
              f"2 not converged), pgs_fallbacks {st['pgs_fallbacks']}, pgs_failures "
              f"{st['pgs_failures']}, contacts_dropped {st['contacts_dropped']} (totals so far)")
    print("  rows: ours = the boxed LCP's (1 normal + 2 friction per contact, plus active limits); "
          "MuJoCo = nefc (pyramidal cone: 4 per contact, plus active limits)")

    times = {}
    if "ours" in settled:
        res, why = try_("ours timing", time_ours, ours, settled["ours"], timing, notes)
        if why:
            notes.append(why)
        else:
            times["ours"], times["pd"], after = res
            st = after["stats"]
            print(f"  ours after timing: root z {after['height']:.4f} m, pgs_fallbacks "
                  f"{st['pgs_fallbacks']}, pgs_failures {st['pgs_failures']}, contacts_dropped "
                  f"{st['contacts_dropped']} (totals)")
    if "MuJoCo" in settled:
        res, why = try_("MuJoCo timing", time_mujoco, mj, settled["MuJoCo"], timing)
        if why:
            notes.append(why)
        else:
            times["mj"], times["pd_mj"], after = res
            print(f"  MuJoCo after timing: root z {after['height']:.4f} m")

    print()
    t_ours, t_mj = times.get("ours"), times.get("mj")
    ratio = t_ours / t_mj if t_ours is not None and t_mj is not None else None
    rtf = DT / t_ours if t_ours is not None else None
    rtf_mj = DT / t_mj if t_mj is not None else None
    verdict = lambda ok, have: "not run" if not have else ("met" if ok else "MISSED")
    print_table(["measure", "ours", "MuJoCo", "target", "result"], [
        ["PD update + step (us)", fmt_us(t_ours), fmt_us(t_mj), "-", "-"],
        ["  of which the PD update (us)", fmt_us(times.get("pd")), fmt_us(times.get("pd_mj")), "-", "-"],
        ["ratio ours / MuJoCo", f"{ratio:.2f}x" if ratio else "n/a", "1x", f"<= {RATIO_TARGET:g}x",
         verdict(ratio is not None and ratio <= RATIO_TARGET, ratio is not None)],
        ["real-time factor (dt / step)", f"{rtf:.1f}" if rtf else "n/a",
         f"{rtf_mj:.1f}" if rtf_mj else "n/a", f"> {RTF_TARGET:g}",
         verdict(rtf is not None and rtf > RTF_TARGET, rtf is not None)],
    ])
    for name in ("ours", "MuJoCo"):
        if name in settled and not settled[name]["standing"]:
            print(f"warning: {name} was not standing after settling: its time is not comparable")
    for note in notes:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
