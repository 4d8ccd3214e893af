"""OpenSim functions read by the .osim loader evaluate as OpenSim's own function classes do:
value, first and second derivative at many points, inside, at the knots and outside."""
import numpy as np
import pytest

from mbsim_ros.formats.opensim import load_opensim, natural_spline
from mbsim_ros.model import ModelError

osim = pytest.importorskip("opensim", reason="OpenSim's Python package (the ground truth) is not installed")

# SimmSpline, NaturalCubicSpline, PiecewiseLinear, Polynomial, ...: the same arithmetic as
# OpenSim's C++ in double precision, so agreement to rounding (relative to the function's size)
REL = 1e-12


def _numbers(values):
    return " ".join(repr(float(v)) for v in values)


def _opensim_function(tmp_path, xml):
    """OpenSim's own object for the function element `xml`."""
    from opensim_reference import opensim
    opensim()
    path = tmp_path / "function.xml"
    path.write_text(f'<?xml version="1.0"?>\n<OpenSimDocument Version="40000">{xml}</OpenSimDocument>')
    f = osim.Function.safeDownCast(osim.OpenSimObject.makeObjectFromFile(str(path)))
    assert f is not None, xml
    return f


def _opensim_eval(f, x, derivative):
    v = osim.Vector(1, float(x))
    if derivative == 0:
        return f.calcValue(v)
    return f.calcDerivative(osim.StdVectorInt([0] * derivative), v)


def _ours(tmp_path, xml):
    """Our Function for the same element, read through a one-joint model's CustomJoint."""
    model = tmp_path / "f.osim"
    model.write_text(f"""<?xml version="1.0"?>
<OpenSimDocument Version="40000"><Model name="f">
  <BodySet><objects><Body name="b"><mass>1</mass><inertia>1 1 1 0 0 0</inertia></Body></objects></BodySet>
  <JointSet><objects><CustomJoint name="j">
    <socket_parent_frame>/ground</socket_parent_frame><socket_child_frame>/bodyset/b</socket_child_frame>
    <coordinates><Coordinate name="q"/></coordinates>
    <SpatialTransform>
      <TransformAxis name="rotation1"><coordinates>q</coordinates><axis>1 0 0</axis>{xml}</TransformAxis>
    </SpatialTransform>
  </CustomJoint></objects></JointSet>
</Model></OpenSimDocument>""")
    joint = load_opensim(model, visuals="none").joint("j")
    return joint.transform_axes[0].function


def _points(x):
    """Inside every interval, at every knot, and outside on both sides."""
    x = np.asarray(x, float)
    span = x[-1] - x[0]
    inner = np.concatenate([np.linspace(a, b, 7)[1:-1] for a, b in zip(x[:-1], x[1:])])
    return np.concatenate([[x[0] - 0.7 * span, x[0] - 1e-3], x, inner, [x[-1] + 1e-3, x[-1] + 0.5 * span]])


def _compare(tmp_path, xml, points, rel=REL, derivatives=(0, 1, 2)):
    theirs = _opensim_function(tmp_path, xml.replace('name="function"', 'name="f"'))
    ours = _ours(tmp_path, xml)
    for d in derivatives:
        expected = np.array([_opensim_eval(theirs, x, d) for x in points])
        got = np.array([float(ours(x, d)) for x in points])
        scale = max(1.0, np.abs(expected).max())
        np.testing.assert_allclose(got, expected, rtol=0, atol=rel * scale, err_msg=f"{xml}: derivative {d}")


RNG = np.random.default_rng(7)
X = np.sort(RNG.uniform(-1.5, 2.0, 9))
Y = RNG.normal(size=9)


@pytest.mark.parametrize("tag", ["SimmSpline", "NaturalCubicSpline"])
@pytest.mark.parametrize("n", [2, 3, 4, 5, 9])
def test_simm_spline_matches_opensim(tmp_path, tag, n):
    # OpenSim's NaturalCubicSpline is the same algorithm as SimmSpline (not a natural spline)
    x, y = X[:n], Y[:n]
    _compare(tmp_path, f'<{tag} name="function"><x>{_numbers(x)}</x><y>{_numbers(y)}</y></{tag}>', _points(x))


def test_simm_spline_from_a_real_model_matches_opensim(tmp_path):
    # the knee translation spline of gait10dof18musc / Rajagopal, written here in full
    x = "-2.0944 -1.74533 -1.39626 -1.0472 -0.698132 -0.349066 -0.174533 0.197344 0.337395 0.490178 1.52146 2.0944"
    y = "-0.0032 0.00179 0.00411 0.0041 0.00212 -0.001 -0.0031 -0.005227 -0.005435 -0.005574 -0.005435 -0.00525"
    _compare(tmp_path, f'<SimmSpline name="function"><x>{x}</x><y>{y}</y></SimmSpline>',
             _points(np.array(x.split(), float)))


def test_piecewise_linear_matches_opensim(tmp_path):
    xml = f'<PiecewiseLinearFunction name="function"><x>{_numbers(X)}</x><y>{_numbers(Y)}</y></PiecewiseLinearFunction>'
    _compare(tmp_path, xml, _points(X), derivatives=(0,))
    # the slope at a knot is one-sided, and OpenSim takes the side its binary search lands on:
    # slopes are compared off the knots
    off_knots = np.array([p for p in _points(X) if np.min(np.abs(p - X)) > 1e-9])
    _compare(tmp_path, xml, off_knots, derivatives=(1, 2))


@pytest.mark.parametrize("coefficients", ["2.5", "2 3", "1.5 -2 3 0.25", "0.1 0 -0.3 2 -1 0.5"])
def test_polynomial_matches_opensim(tmp_path, coefficients):
    # OpenSim lists the coefficients of decreasing powers
    _compare(tmp_path, f'<PolynomialFunction name="function"><coefficients>{coefficients}</coefficients>'
                       '</PolynomialFunction>', np.linspace(-3, 3, 25))


@pytest.mark.parametrize("xml", [
    '<LinearFunction name="function"><coefficients>-1.75 0.3</coefficients></LinearFunction>',
    '<Constant name="function"><value>0.42</value></Constant>',
    '<Sine name="function"><amplitude>0.7</amplitude><omega>2.5</omega><phase>0.3</phase><offset>-0.2</offset></Sine>',
    '<StepFunction name="function"><transition_start_time>-0.5</transition_start_time>'
    '<transition_end_time>1.2</transition_end_time><start_value>0.3</start_value><end_value>-1.1</end_value></StepFunction>',
])
def test_simple_functions_match_opensim(tmp_path, xml):
    _compare(tmp_path, xml, np.linspace(-2, 2, 33))


def test_multiplier_function_folds_its_scale(tmp_path):
    inner = f"<SimmSpline><x>{_numbers(X)}</x><y>{_numbers(Y)}</y></SimmSpline>"
    _compare(tmp_path, f'<MultiplierFunction name="function"><function>{inner}</function><scale>-1.37</scale>'
                       '</MultiplierFunction>', _points(X))


@pytest.mark.parametrize("half_order", [1, 2, 3, 4])
def test_gcv_spline_is_the_natural_spline_with_opensims_extension(tmp_path, half_order):
    x, y = X, Y
    xml = (f'<GCVSpline name="function"><half_order>{half_order}</half_order><x>{_numbers(x)}</x>'
           f'<y>{_numbers(y)}</y></GCVSpline>')
    # OpenSim fits the spline numerically (Woltring's GCVSPL with error variance 0): through the
    # points only to about 1e-12 of the values for degree 5 and 1e-11 for degree 7, its
    # derivatives to about 1e-9 of their size; so agreement with OpenSim is checked at that
    # level, and exactness below against scipy's natural spline
    rel = {1: 1e-12, 2: 1e-11, 3: 1e-9, 4: 1e-8}[half_order]
    if half_order == 1:     # piecewise linear: one-sided slopes at the knots, as above
        _compare(tmp_path, xml, _points(x), rel=rel, derivatives=(0,))
        _compare(tmp_path, xml, np.array([p for p in _points(X) if np.min(np.abs(p - X)) > 1e-9]), rel=rel)
    else:
        _compare(tmp_path, xml, _points(x), rel=rel)
    ours = _ours(tmp_path, xml)
    np.testing.assert_allclose([float(ours(a)) for a in x], y, rtol=0, atol=1e-12)


def test_natural_cubic_gcv_spline_equals_scipys_natural_cubic_spline():
    from scipy.interpolate import CubicSpline
    f = natural_spline(X, Y, 2)
    cs = CubicSpline(X, Y, bc_type="natural")
    t = np.linspace(X[0], X[-1], 101)
    for d in (0, 1, 2):
        np.testing.assert_allclose(f(t, d), cs(t, d), rtol=0, atol=1e-12 * max(1, np.abs(cs(t, d)).max()))
    # outside: the line that continues it (degree half_order - 1)
    for e, t in ((X[0], X[0] - 0.8), (X[-1], X[-1] + 0.6)):
        np.testing.assert_allclose(f(t), cs(e) + cs(e, 1) * (t - e), rtol=1e-13)


def test_unknown_function_type_names_the_element_and_line(tmp_path):
    with pytest.raises(ModelError, match=r"f\.osim, line 8, <ExpressionBasedFunction name=\"function\">: "
                                         r"unknown function type"):
        _ours(tmp_path, '<ExpressionBasedFunction name="function"><expression>x^2</expression>'
                        '</ExpressionBasedFunction>')


@pytest.mark.parametrize("xml, expected", [
    ('<SimmSpline name="function"><x>0 1 1 2</x><y>0 1 2 3</y></SimmSpline>', "increase strictly"),
    ('<SimmSpline name="function"><x>0</x><y>0</y></SimmSpline>', "two or more"),
    ('<GCVSpline name="function"><half_order>3</half_order><x>0 1 2</x><y>0 1 2</y></GCVSpline>', "6 or more"),
    ('<LinearFunction name="function"><coefficients>1 x</coefficients></LinearFunction>', "expected numbers"),
])
def test_bad_function_data_names_the_element(tmp_path, xml, expected):
    with pytest.raises(ModelError, match=expected) as info:
        _ours(tmp_path, xml)
    assert "f.osim, line 8" in str(info.value)
