"""Initial assembly: move the initial coordinates the least onto the loop closures, as OpenSim
(initSystem) and Chrono assemble a model with constraints before it runs.

The problem: minimize |dq|^2 (the tangent displacement from the initial q, v-space, so
quaternion joints move on their manifold) subject to e(q (+) dq) = 0 for every loop closure row
e (constraints.py: its Baumgarte target is -joint_erp e / dt), locked DOFs held. Gauss-Newton
on the optimality conditions: each iteration takes the linearized problem's solution
    step = -J+ e + (I - J+ J)(-d)      d: the displacement so far, J: the rows on free DOFs,
which is Newton's method on the constraints plus the projection that keeps the displacement
least; it stops when every |e| <= ASSEMBLY_TOL and the step is below it."""
from __future__ import annotations

import numpy as np

from . import kernels
from .constraints import loop_rows_kernel

ASSEMBLY_TOL = 1e-10        # m and rad: each constraint function's residual at the assembled state
MAX_ITERATIONS = 100


def loop_residuals(compiled, constraints, df, q):
    """(J, e): the loop closure rows (m x nv) and their constraint functions at q."""
    k = constraints
    m = loop_rows_kernel(compiled.buffers, df, k.rule_buffers, k.solver_buffers, q, 1.0, 1.0)
    s = k.solver
    return s.J[:m].copy(), -s.b[:m].copy()


def assemble(compiled, constraints, q0):
    """(q, displacement per DOF (nv), residual): q0 moved least onto the loop closures."""
    q = np.array(q0, dtype=float)
    nv = compiled.nv
    displacement = np.zeros(nv)
    if constraints.nlooprows == 0:
        return q, displacement, 0.0
    df, _ = compiled.new_data()
    free = constraints.rules.locked == 0
    J, e = loop_residuals(compiled, constraints, df, q)
    out = np.empty_like(q)
    for _ in range(MAX_ITERATIONS):
        Jf = J[:, free]
        pinv = np.linalg.pinv(Jf, rcond=1e-12)
        d = displacement[free]
        step_free = -pinv @ e - (d - pinv @ (Jf @ d))
        step = np.zeros(nv)
        step[free] = step_free
        if np.abs(e).max() <= ASSEMBLY_TOL and np.abs(step).max() <= ASSEMBLY_TOL:
            break
        kernels.integrate_kernel(compiled.tf, compiled.ti, q, step, 1.0, out)
        q[:] = out
        displacement += step
        J, e = loop_residuals(compiled, constraints, df, q)
    return q, displacement, float(np.abs(e).max()) if len(e) else 0.0
