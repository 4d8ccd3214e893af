"""The functional API (mb.forward_dynamics, inverse_dynamics, mass_matrix) keeps each model's
compiled arrays between calls: a call must still see every change to the model (its gravity, its
numbers after finalize()) and never another model's arrays. The oracle is a freshly built model
with the changed values (its own compile), compared exactly: the same arrays in the same kernel."""
import copy

import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros.model import Joint, Link, Model, ModelError


def arm(mass=1.0, gravity=(0, 0, -9.80665), name="arm"):
    m = Model(name, gravity=gravity)
    m.add_link(Link("base", 1.0, [0, 0, 0], np.eye(3) * 0.01))
    m.add_link(Link("upper", mass, [0.2, 0, 0], np.diag([0.001, 0.02, 0.02])))
    m.add_link(Link("fore", 0.5, [0.15, 0, 0], np.diag([0.001, 0.01, 0.01])))
    m.add_joint(Joint("root", "free", None, "base"))
    m.add_joint(Joint("shoulder", "revolute", "base", "upper", axis=[0, 1, 0]))
    m.add_joint(Joint("elbow", "revolute", "upper", "fore", axis=[0, 0.6, 0.8],
                      origin=np.array([[1, 0, 0, 0.4], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])))
    return m.finalize()


@pytest.fixture
def state():
    rng = np.random.default_rng(3)
    q = np.r_[rng.standard_normal(3), [0.1, -0.2, 0.3, 0.927], rng.standard_normal(2)]
    q[3:7] /= np.linalg.norm(q[3:7])
    return q, rng.standard_normal(8), rng.standard_normal(8)


def all_three(model, q, v, x):
    return mb.forward_dynamics(model, q, v, x), mb.inverse_dynamics(model, q, v, x), mb.mass_matrix(model, q)


def test_alternating_models_each_get_their_own_arrays(state):
    q, v, x = state
    light, heavy = arm(1.0, name="light"), arm(3.0, name="heavy")
    ref_light, ref_heavy = all_three(arm(1.0), q, v, x), all_three(arm(3.0), q, v, x)
    for _ in range(2):
        for model, ref in ((light, ref_light), (heavy, ref_heavy), (light, ref_light)):
            for got, want in zip(all_three(model, q, v, x), ref):
                assert np.array_equal(got, want)
    assert not np.allclose(ref_light[0], ref_heavy[0])


def test_gravity_changed_in_place_or_replaced_is_seen_by_the_next_call(state):
    q, v, x = state
    model = arm()
    mb.forward_dynamics(model, q, v, x)
    model.gravity[:] = (1.0, 0.0, -3.0)
    assert np.array_equal(mb.forward_dynamics(model, q, v, x), mb.forward_dynamics(arm(gravity=(1, 0, -3)), q, v, x))
    model.gravity = np.array([0.0, 2.0, 0.0])
    assert np.array_equal(mb.inverse_dynamics(model, q, v, x), mb.inverse_dynamics(arm(gravity=(0, 2, 0)), q, v, x))


def test_numbers_edited_and_finalized_are_recompiled(state):
    q, v, x = state
    model = arm(1.0)
    before = mb.forward_dynamics(model, q, v, x)
    model.link("upper").mass = 2.5
    model.finalize()
    after = all_three(model, q, v, x)
    for got, want in zip(after, all_three(arm(2.5), q, v, x)):
        assert np.array_equal(got, want)
    assert not np.allclose(before, after[0])


def test_inputs_of_any_array_kind_are_accepted_and_bad_ones_named(state):
    q, v, x = state
    model = arm()
    want = mb.forward_dynamics(model, q, v, x)
    wide = np.zeros((2, 8))
    wide[0] = v
    assert np.array_equal(mb.forward_dynamics(model, list(q), wide[0], tuple(x)), want)
    assert np.array_equal(mb.forward_dynamics(model, q, np.asfortranarray(wide)[0], x), want)   # strided view
    with pytest.raises(ValueError, match=r"v: expected a vector of length 8, got shape \(7,\)"):
        mb.forward_dynamics(model, q, v[:7], x)


def test_unaligned_read_only_and_other_dtype_inputs_give_the_same_numbers(state):
    # the kernels are called past the dispatcher, with the types of the first call: every other
    # kind of vector must be made that type first, not read as it lies in memory
    q, v, x = state
    model = arm()
    want = mb.forward_dynamics(model, q, v, x), mb.inverse_dynamics(model, q, v, x), mb.mass_matrix(model, q)
    raw = bytearray(8 * 8 + 1)
    unaligned = np.frombuffer(raw, dtype=np.float64, offset=1, count=8)
    unaligned[:] = v
    assert not unaligned.flags.aligned
    read_only = x.copy()
    read_only.flags.writeable = False
    as_float32 = q.astype(np.float32).astype(np.float64)     # the numbers a float32 q holds
    assert np.array_equal(mb.forward_dynamics(model, q, unaligned, read_only), want[0])
    assert np.array_equal(mb.inverse_dynamics(model, q, unaligned, read_only), want[1])
    assert np.array_equal(mb.mass_matrix(model, q.astype(np.float32)), mb.mass_matrix(model, as_float32))
    with pytest.raises(ValueError, match=r"q: expected a vector of length 9, got shape \(9, 1\)"):
        mb.mass_matrix(model, q.reshape(9, 1))


def test_a_massless_joint_is_named_at_every_call_not_only_the_first():
    m = copy.deepcopy(arm())
    m.link("fore").mass = 0.0
    m.link("fore").inertia = np.zeros((3, 3))
    m.finalize()
    for _ in range(2):
        with pytest.raises(ModelError, match="forward_dynamics of model 'arm': joint 'elbow' moves only links"):
            mb.forward_dynamics(m, m.initial_q(), np.zeros(8), np.zeros(8))
