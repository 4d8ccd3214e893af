"""Packed functions evaluated by the numba kernel agree with scipy's piecewise polynomials and
with the Model's own numpy evaluation, derivatives and extrapolation included."""
import numpy as np
import pytest
from scipy.interpolate import CubicSpline

from mbsim_ros.dynamics.functions import eval_function, pack_functions
from mbsim_ros.model import Function, ModelError


def kernel_values(f, xs, inputs=(0.0,)):
    ff, fi, _ = pack_functions([f], ["u"])
    return np.array([eval_function(ff, fi, 0, float(x), np.asarray(inputs, float)) for x in xs])


def test_cubic_spline_matches_scipy_inside_and_extends_linearly_outside():
    x = np.array([0.0, 0.3, 1.0, 1.7, 2.0])
    cs = CubicSpline(x, np.sin(3 * x), bc_type="natural")
    f = Function(breaks=x, coefs=cs.c[::-1].T, extrapolate="linear")
    inside = np.linspace(0, 2, 41)
    got = kernel_values(f, inside)
    # 1e-12: the same polynomials, only rounding differs
    for d in range(3):
        np.testing.assert_allclose(got[:, d], cs(inside, d), atol=1e-12)
    out = kernel_values(f, [-0.5, 2.5])
    np.testing.assert_allclose(out[0], [cs(0) - 0.5 * cs(0, 1), cs(0, 1), 0.0], atol=1e-12)
    np.testing.assert_allclose(out[1], [cs(2) + 0.5 * cs(2, 1), cs(2, 1), 0.0], atol=1e-12)


@pytest.mark.parametrize("f", [
    Function.polynomial([1.0, -2.0, 0.5, 0.25]),
    Function.constant(3.0),
    Function.linear(2.0, -1.0),
    Function.piecewise_linear([0, 1, 3], [0, 2, -1], extrapolate="constant"),
    Function.sine(2.0, 0.5, 0.3, 1.0),
    Function(breaks=[0, 1], coefs=[[0, 1]], repeat=(0.0, 1.0, 0.25)),
])
def test_kernel_equals_numpy_evaluation(f):
    xs = np.linspace(-2.3, 4.1, 57)
    got = kernel_values(f, xs)
    for d in range(3):
        np.testing.assert_allclose(got[:, d], f(xs, d), atol=1e-12, err_msg=f"derivative {d}")


def test_input_function_reads_its_slot():
    ff, fi, names = pack_functions([Function.input("b"), Function.input("a")], ["a"])
    assert names == ["a", "b"]
    assert eval_function(ff, fi, 0, 0.0, np.array([1.0, 2.0]))[0] == 2.0
    assert eval_function(ff, fi, 1, 0.0, np.array([1.0, 2.0]))[0] == 1.0


def test_bad_functions_are_refused():
    with pytest.raises(ModelError, match="increase strictly"):
        Function(breaks=[0, 0], coefs=[[1.0]])
    with pytest.raises(ModelError, match="coefficients"):
        Function(breaks=[0, 1, 2], coefs=[[1.0]])
    with pytest.raises(ModelError, match="two or more"):
        Function.piecewise_linear([0], [1])
