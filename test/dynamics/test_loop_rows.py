"""Loop closure rows: each row is the exact rate of its constraint function.

For every loop kind between random links of a random tree (every joint type), the row J at a
random state must satisfy J v = de/dt, with e read back from the row's Baumgarte target
(target = -joint_erp e / dt) and de/dt by central differences along v on the manifold
(step 1e-6: truncation ~1e-12, rounding ~1e-10; tolerance 1e-6 relative)."""
import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros.dynamics import kernels
from mbsim_ros.dynamics.compiled import compile_models
from mbsim_ros.dynamics.constraints import LOOP_KINDS, ConstraintSet, loop_rows_kernel
from mbsim_ros.model import Joint, Link, LoopConstraint, Model

from pin_reference import random_state, random_tree, random_unit

ERP, DT = 0.2, 1e-3


def rows_at(compiled, cs, df, q):
    m = loop_rows_kernel(compiled.buffers, df, cs.rule_buffers, cs.solver_buffers, q, ERP, DT)
    s = cs.solver
    return s.J[:m].copy(), -s.b[:m] * DT / ERP


def with_loops(rng, kinds, world=False):
    """A random tree with loops of `kinds` between random links (world: one side is the world)."""
    model = random_tree(rng, n_links=8)
    q0, _, _ = random_state(rng, model)
    for j in model.joints:             # start at the random state so weld/hinge references are there
        j.q0 = q0[j.q_index:j.q_index + j.nq]
    names = [link.name for link in model.links]
    for k, kind in enumerate(kinds):
        a, b = rng.choice(len(names), 2, replace=False)
        params = {"distance": 0.3} if kind == "distance" else {}
        link1, link2 = names[a], names[b]
        if world:
            link1, link2 = (None, link2) if k % 2 else (link1, None)
        model.constraints.append(LoopConstraint(f"loop{k}", kind, link1, link2,
                                                rng.uniform(-0.3, 0.3, 3), rng.uniform(-0.3, 0.3, 3),
                                                random_unit(rng), params))
    return model.finalize()


def world_with_every_loop_kind(rng, world=False):
    """A random tree with one loop of every kind, and (compiled, constraint set, workspace)."""
    model = with_loops(rng, list(LOOP_KINDS), world)
    compiled = compile_models(model)
    df, _ = compiled.new_data()
    return model, (compiled, ConstraintSet(compiled, None, 0), df)


def rate_along(world, q, v, h=1e-6):
    """de/dt along v by central differences on the manifold."""
    compiled = world[0]
    return (rows_at(*world, kernels_integrate(compiled, q, v * h))[1]
            - rows_at(*world, kernels_integrate(compiled, q, -v * h))[1]) / (2 * h)


@pytest.mark.parametrize("seed,to_world", [(0, False), (1, False), (2, False), (3, False), (4, True), (5, True)])
def test_every_row_is_the_rate_of_its_constraint_function(seed, to_world):
    """to_world: each loop joins a link to the world (link None: world coordinates)."""
    rng = np.random.default_rng(seed)
    model, world = world_with_every_loop_kind(rng, to_world)
    # move away from the reference state so that the constraints are violated, then test there
    q = kernels_integrate(world[0], model.initial_q(), rng.normal(size=model.nv) * 0.2)
    v = rng.normal(size=model.nv)
    J, e = rows_at(*world, q)
    assert J.shape[0] == sum(n for _, n in LOOP_KINDS.values())
    rate = rate_along(world, q, v)
    # the weld's (and orientation's) angular error is the skew part of a rotation: its rate is
    # w_a - w_b only near closure, so its rows are checked at the reference state below instead
    weld = np.concatenate([rows_of(model, "weld")[3:], rows_of(model, "orientation")])
    keep = np.setdiff1d(np.arange(len(e)), weld)
    np.testing.assert_allclose((J @ v)[keep], rate[keep], rtol=1e-6, atol=1e-6 * np.abs(J @ v).max())


def test_weld_rows_are_exact_at_closure_and_errors_are_zero_at_the_reference_state():
    rng = np.random.default_rng(7)
    model, world = world_with_every_loop_kind(rng)
    q = model.initial_q()
    v = rng.normal(size=model.nv)
    J, e = rows_at(*world, q)
    rate = rate_along(world, q, v)
    np.testing.assert_allclose(J @ v, rate, rtol=1e-6, atol=1e-6 * np.abs(J @ v).max())
    # angular rows (weld, hinge, parallel, orientation, revolute_translational) start closed;
    # point rows measure the random points' separation, checked against link_transforms for the ball rows
    T = mb.link_transforms(model, q)
    for k, lc in enumerate(model.constraints):
        rows = rows_of(model, lc.type, k)
        if lc.type in ("weld", "hinge"):
            np.testing.assert_allclose(e[rows[3:]], 0, atol=1e-12)
        if lc.type in ("parallel", "orientation"):
            np.testing.assert_allclose(e[rows], 0, atol=1e-12)
        if lc.type in ("ball", "xyz", "weld", "hinge"):
            pa = T[lc.link1][:3, :3] @ lc.pos1 + T[lc.link1][:3, 3]
            pb = T[lc.link2][:3, :3] @ lc.pos2 + T[lc.link2][:3, 3]
            np.testing.assert_allclose(e[rows[:3]], pa - pb, atol=1e-12)
        if lc.type == "distance":
            pa = T[lc.link1][:3, :3] @ lc.pos1 + T[lc.link1][:3, 3]
            pb = T[lc.link2][:3, :3] @ lc.pos2 + T[lc.link2][:3, 3]
            assert e[rows[0]] == pytest.approx(np.linalg.norm(pa - pb) - 0.3, abs=1e-12)


def rows_of(model, kind, index=None):
    """Row indices of the loops of `kind` (or of loop number `index`)."""
    out, row = [], 0
    for k, lc in enumerate(model.constraints):
        n = LOOP_KINDS[lc.type][1]
        if (index is None and lc.type == kind) or index == k:
            out.extend(range(row, row + n))
        row += n
    return np.array(out, dtype=int)


def kernels_integrate(compiled, q, dv):
    out = np.empty_like(q)
    kernels.integrate_kernel(compiled.tf, compiled.ti, q, dv, 1.0, out)
    return out


def test_unknown_loop_type_and_link_are_model_errors():
    m = Model("m")
    m.add_link(Link("a", 1.0, [0, 0, 0], np.eye(3)))
    m.add_joint(Joint("j", "revolute", None, "a"))
    m.constraints.append(LoopConstraint("bad", "glue", "a", "a"))
    m.finalize()
    with pytest.raises(mb.ModelError, match="loop constraint 'bad': type 'glue'"):
        ConstraintSet(compile_models(m), None, 0)
    m.constraints[0] = LoopConstraint("bad", "ball", "a", "nowhere")
    with pytest.raises(mb.ModelError, match="no link named 'nowhere'"):
        ConstraintSet(compile_models(m), None, 0)
