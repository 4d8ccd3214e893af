"""Large constraint problems go to Gauss-Seidel on the rows (dynamics/gauss_seidel.py) and get
the answer of the exact pivoting solver: checked against statics (each layer of a stack carries
the weight above it) and against the pivoting solver itself on the same state.

Tolerances: Gauss-Seidel stops when no row moves by more than ITERATIVE_TOLERANCE (1e-4) of the
problem's velocity scale (here about 0.1 m/s: a 1 kg box's corner impulse response) in a
sweep; the stack's slow modes leave its velocities up to 1e-4 m/s and 6e-4 rad/s from the exact
ones (measured), held to 1e-3; a wrong impulse (a sign, a missing term) is off by g dt ~ 1e-2."""
import numpy as np

import mbsim_ros as mb
from mbsim_ros.dynamics.constraints import GAUSS_SEIDEL, ITERATIVE_HOLDOFF, ITERATIVE_ROWS
from conftest import OWN_MODELS

G = 9.80665
PIVOTING_ONLY = dict(iterative_rows=1e9)


def stack(**options):
    return mb.Simulation(mb.load_model(str(OWN_MODELS / "mjcf" / "stack.xml")), dt=0.001, **options)


def level(link):
    """A box's place in the stack (box0 at the bottom), -1 for the floor."""
    return int(link[3:]) if link.startswith("box") else -1


def step_to_gauss_seidel(sim, steps):
    """steps steps, then on to the first step Gauss-Seidel solved (after a failure the pivoting
    solver holds the next ITERATIVE_HOLDOFF steps)."""
    sim.step(steps)
    for _ in range(2 * ITERATIVE_HOLDOFF):
        if sim.stats()["lcp_status"] == GAUSS_SEIDEL:
            return
        sim.step()
    raise AssertionError(f"no step solved by Gauss-Seidel: {sim.stats()}")


def test_each_box_of_a_stack_carries_the_weight_above_it():
    sim = stack()
    step_to_gauss_seidel(sim, 300)
    stats = sim.stats()
    assert stats["rows"] == 120 >= ITERATIVE_ROWS
    assert stats["lcp_status"] == GAUSS_SEIDEL, stats
    carried = np.zeros(10)      # the upward force on each box from the one below (or the floor)
    for c in sim.contacts():
        a, b = level(c.link_a), level(c.link_b)
        carried[max(a, b)] += c.force[2] if a > b else -c.force[2]
    np.testing.assert_allclose(carried, (10 - np.arange(10)) * G, rtol=1e-3)


def test_gauss_seidel_gives_the_pivoting_solvers_velocities():
    iterative, pivoting = stack(), stack(**PIVOTING_ONLY)
    iterative.step(200)
    for _ in range(2 * ITERATIVE_HOLDOFF):      # on to a step that Gauss-Seidel solves
        pivoting.q[:], pivoting.v[:] = iterative.q, iterative.v
        iterative.step()
        pivoting.step()
        if iterative.stats()["lcp_status"] == GAUSS_SEIDEL:
            break
    assert iterative.stats()["lcp_status"] == GAUSS_SEIDEL
    assert pivoting.stats()["lcp_status"] == 0
    np.testing.assert_allclose(iterative.v, pivoting.v, atol=1e-3)      # m/s and rad/s


def test_steps_repeat_bit_for_bit():
    first, second = stack(), stack()
    first.step(300)
    second.step(300)
    assert np.array_equal(first.q, second.q) and np.array_equal(first.v, second.v)


def test_after_gauss_seidel_fails_the_pivoting_solver_takes_the_next_steps():
    # one sweep mostly does not converge: each failure leaves the next ITERATIVE_HOLDOFF steps to
    # the pivoting solver (exact, lcp_status 0), then Gauss-Seidel is tried again
    sim = stack(iterative_sweeps=1)
    statuses, failures = [], []
    for _ in range(3 * (ITERATIVE_HOLDOFF + 1)):
        sim.step()
        statuses.append(sim.stats()["lcp_status"])
        failures.append(sim.stats()["iterative_unconverged"])
    first = failures.index(1)
    assert all(status == 0 for status in statuses[first:first + ITERATIVE_HOLDOFF + 1])
    assert failures[first + ITERATIVE_HOLDOFF] == 1            # not tried during the hold-off
    assert 1 <= failures[-1] <= 3
