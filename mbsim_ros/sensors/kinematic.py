"""Accelerometers, gyros and force sensors of a whole world in one numba call.

The state handed in is one instant of the dynamics: (q, v) at the start of a step and the
acceleration a that the step applied (constraint and contact impulses included, so a = (v+ - v)/dt
for the semi-implicit Euler step). Newton-Euler then holds exactly at that instant:
  - RNEA's forward pass gives every body's spatial acceleration with the world accelerating at
    -g, i.e. the proper acceleration an accelerometer feels;
  - RNEA's backward pass, with the step's contact forces and the force elements' body forces
    (springs, bushings, actuators, loads, force motors: dynamics/forces.py, evaluated at the
    same instant) as external forces, gives the wrench the parent exerts on each subtree
    through its joint (joint torques, limits and springs are inside it; only forces from
    outside the subtree enter as fext).
OpenHRP semantics (../shared/docs/sensors-and-ros.md, section 1), all in the sensor frame:
  accelerometer  R_s^T (a_point - g), lever-arm terms alpha x r + w x (w x r) included
  gyro           R_s^T w
  force          the wrench the sensor's link and its descendants exert on the parent,
                 torque about the sensor origin (SDF child_to_parent; MuJoCo's force and torque
                 sensors report the opposite, parent-on-child, wrench)
"""
from ..dynamics.constraints import add_body_force
from ..dynamics.forces import H_N, apply_forces, carve_forces
from ..dynamics.kernels import carve_data, carve_tree, kernel, link_poses, rnea, velocity_kinematics

ACCELEROMETER, GYRO, FORCE = 1, 2, 3


@kernel
def sense_kernel(tree, data, forces, time, q, v, a, c_link, c_point, c_force, kind, body, R, p, tau_scratch, out):
    """out[k, :] = reading of sensor k (3 values for accelerometer and gyro, 6 for force).

    kind: ACCELEROMETER | GYRO | FORCE; body: its compiled body, -1 if welded to the world;
    R, p: sensor frame in the body frame (in the world frame when body is -1).
    c_link (n, 2), c_point (n, 3), c_force (n, 3): contacts, force on link a at the world
    point (link b gets its opposite). tree, data: as step.py's kernels take them; forces: the
    force elements' bundle (ForceSet.buffers), applied at `time`, None when there are none."""
    tf, ti = tree
    t, _, _ = carve_tree(tf, ti)
    d, _ = carve_data(data, ti)
    velocity_kinematics(t, d, q, v)
    link_poses(t, d)
    fext = d.fext
    fext[:, :] = 0.0
    for k in range(c_link.shape[0]):
        add_body_force(t.link_body, d.Rw, d.pw, fext, c_link[k, 0], c_point[k], c_force[k], 1.0)
        add_body_force(t.link_body, d.Rw, d.pw, fext, c_link[k, 1], c_point[k], c_force[k], -1.0)
    # generalized forces act inside their joints (like joint torques): only body forces matter
    if forces is not None:       # None: a world without force elements, compiled without them
        ef, ei = forces
        fe, _, _ = carve_forces(ef, ei)
        if fe.flags[H_N] > 0:
            apply_forces(t, d, fe, q, v, time, tau_scratch, False)
    rnea(t, d, a, tau_scratch)
    g = t.gravity
    for k in range(kind.shape[0]):
        b = body[k]
        Rk = R[k]
        r0, r1, r2 = p[k, 0], p[k, 1], p[k, 2]
        x0 = x1 = x2 = y0 = y1 = y2 = 0.0
        if b < 0:                          # welded to the world: at rest
            if kind[k] == ACCELEROMETER:
                x0, x1, x2 = -g[0], -g[1], -g[2]
        elif kind[k] == ACCELEROMETER:
            v0, v1, v2 = d.vel[b, 0], d.vel[b, 1], d.vel[b, 2]
            w0, w1, w2 = d.vel[b, 3], d.vel[b, 4], d.vel[b, 5]
            al0, al1, al2 = d.acc[b, 3], d.acc[b, 4], d.acc[b, 5]
            # velocity of the sensor point, then a_point = a_o + alpha x r + w x v_point
            u0 = v0 + w1 * r2 - w2 * r1
            u1 = v1 + w2 * r0 - w0 * r2
            u2 = v2 + w0 * r1 - w1 * r0
            x0 = d.acc[b, 0] + al1 * r2 - al2 * r1 + w1 * u2 - w2 * u1
            x1 = d.acc[b, 1] + al2 * r0 - al0 * r2 + w2 * u0 - w0 * u2
            x2 = d.acc[b, 2] + al0 * r1 - al1 * r0 + w0 * u1 - w1 * u0
        elif kind[k] == GYRO:
            x0, x1, x2 = d.vel[b, 3], d.vel[b, 4], d.vel[b, 5]
        else:
            # d.f[b]: the parent's wrench on the subtree about the body origin; negate it and
            # move the torque to the sensor origin: n_r = n - r x f
            f0, f1, f2 = d.f[b, 0], d.f[b, 1], d.f[b, 2]
            x0, x1, x2 = -f0, -f1, -f2
            y0 = -(d.f[b, 3] - (r1 * f2 - r2 * f1))
            y1 = -(d.f[b, 4] - (r2 * f0 - r0 * f2))
            y2 = -(d.f[b, 5] - (r0 * f1 - r1 * f0))
        for c in range(3):
            out[k, c] = Rk[0, c] * x0 + Rk[1, c] * x1 + Rk[2, c] * x2
            out[k, 3 + c] = Rk[0, c] * y0 + Rk[1, c] * y1 + Rk[2, c] * y2
