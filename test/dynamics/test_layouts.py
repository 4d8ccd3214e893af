"""Every buffer's layout (the *_layout functions: {field: length} in carve order) against its
carve function: each field of the carved views has its layout's length and offset, and the
carve uses exactly the buffer lengths that the size functions give (so that a size and its
carve cannot disagree). Run through the carves' Python functions (numpy views, no compiling)."""
import numpy as np
import pytest

from mbsim_ros.dynamics import constraints, forces, kernels
from mbsim_ros.dynamics.collision import layout


def offset(buffer, view):
    return (view.ctypes.data - buffer.ctypes.data) // buffer.itemsize


def check(fields, buffer, carved):
    """Each named field of `fields` is the carved view of that length at the running offset."""
    at = 0
    for name, length in fields.items():
        if name in carved._fields:
            view = getattr(carved, name)
            assert view.size == length, f"{type(carved).__name__}.{name}: {view.size} long, layout says {length}"
            if length:
                assert offset(buffer, view) == at, f"{type(carved).__name__}.{name} at {offset(buffer, view)}, layout says {at}"
        at += length
    assert at == len(buffer)


def carve_both(layout_fn, sizes_fn, counts, header=None):
    """Zeroed buffers of sizes_fn(*counts) (the int buffer opening with `header`) and the
    layout_fn(*counts) they must be carved into; the sizes are the layout's sums."""
    floats, ints = layout_fn(*counts)
    nf, ni = sizes_fn(*counts)
    assert (nf, ni) == (sum(floats.values()), sum(ints.values()))
    f, i = np.zeros(nf), np.zeros(ni, dtype=np.int64)
    if header is not None:
        i[:len(header)] = header
    return f, i, floats, ints


SIZES = [(1, 1, 1, 1, 1), (3, 7, 5, 11, 2), (4, 12, 9, 0, 0)]


@pytest.mark.parametrize("nb, nv, nl, nff, nfn", SIZES)
def test_tree_and_data(nb, nv, nl, nff, nfn):
    nq = nv + 1
    f, i, floats, ints = carve_both(kernels.tree_layout, kernels.tree_sizes, (nb, nv, nl, nff, nfn),
                                    header=(nb, nv, nl, nq, nff, nfn))
    tree, used_f, used_i = kernels.carve_tree.py_func(f, i)
    assert (used_f, used_i) == (len(f), len(i))
    check(floats, f, tree)
    check(ints, i, tree)
    df = np.zeros(kernels.data_size(nb, nv, nq, nl))
    data, used = kernels.carve_data.py_func(df, i)
    assert used == len(df)
    check(kernels.data_layout(nb, nv, nq, nl)[0], df, data)


@pytest.mark.parametrize("ng, nverts, npair, capacity, ncand", [(1, 0, 1, 1, 1), (5, 17, 6, 13, 40)])
def test_geoms_and_contacts(ng, nverts, npair, capacity, ncand):
    f, i, floats, ints = carve_both(layout.geom_layout, layout.geom_sizes, (ng, nverts, npair),
                                    header=(ng, nverts, npair, capacity))
    geoms, used_f, used_i = layout.carve_geoms.py_func(f, i)
    assert (used_f, used_i) == (len(f), len(i))
    check(floats, f, geoms)
    check(ints, i, geoms)
    f, i, floats, ints = carve_both(layout.contacts_layout, layout.contacts_sizes, (capacity, ng, ncand),
                                    header=(capacity, ng, ncand))
    contacts, used_f, used_i = layout.carve_contacts.py_func(f, i)
    assert (used_f, used_i) == (len(f), len(i))
    check(floats, f, contacts)
    check(ints, i, contacts)


@pytest.mark.parametrize("counts", [(0, 0, 0, 0, 0, 0), (3, 8, 5, 2, 2, 1)])
def test_forces(counts):
    n, nmap, nff, nfun, nact, ninp = counts
    header = np.zeros(forces.HEADER, dtype=np.int64)
    header[[forces.H_N, forces.H_NMAP, forces.H_NFF, forces.H_NFUN, forces.H_NACT, forces.H_NINP]] = counts
    f, i, floats, ints = carve_both(forces.forces_layout, forces.forces_sizes, counts, header=header)
    fe, used_f, used_i = forces.carve_forces.py_func(f, i)
    assert (used_f, used_i) == (len(f), len(i))
    check(floats, f, fe)
    check(ints, i, fe)


@pytest.mark.parametrize("nv, nloop, mmax, maxc, nlooprows", [(1, 0, 1, 1, 1), (9, 3, 20, 6, 11)])
def test_rules_and_solver(nv, nloop, mmax, maxc, nlooprows):
    f, i, floats, ints = carve_both(constraints.rules_layout, constraints.rules_sizes, (nv, nloop))
    rules, used_f, used_i = constraints.carve_rules.py_func(f, i, nv, nloop)
    assert (used_f, used_i) == (len(f), len(i))
    check(floats, f, rules)
    check(ints, i, rules)
    counts = (mmax, nv, maxc, nlooprows)
    f, i, floats, ints = carve_both(constraints.solver_layout, constraints.solver_sizes, counts)
    solver, used_f, used_i = constraints.carve_solver.py_func(f, i, *counts)
    assert (used_f, used_i) == (len(f), len(i))
    check(floats, f, solver)
    check(ints, i, solver)


def test_every_field_of_each_view_is_in_its_layout():
    """A field added to a namedtuple but not to its layout would go unchecked above."""
    pairs = [(kernels.Tree, kernels.tree_layout(1, 1, 1, 1, 1)), (kernels.Data, kernels.data_layout(1, 1, 1, 1)),
             (layout.Geoms, layout.geom_layout(1, 1, 1)), (layout.Contacts, layout.contacts_layout(1, 1, 1)),
             (forces.Forces, forces.forces_layout(1, 1, 1, 1, 1, 1)),
             (constraints.Rules, constraints.rules_layout(1, 1)), (constraints.Solver, constraints.solver_layout(1, 1, 1, 1))]
    for view, (floats, ints) in pairs:
        assert set(view._fields) <= set(floats) | set(ints), view.__name__


def test_compiled_view_is_the_numpy_view():
    """array_view compiled (the view's header filled in, nothing checked) and in Python (slice
    and reshape) give the same view: address, shape, strides and values, for 1 to 3 dimensions,
    float and int buffers, a literal dimension in the shape, an empty view."""
    from numba import njit
    from mbsim_ros.dynamics.views import array_view

    @njit
    def one(buf, o, n):
        return array_view(buf, o, n)

    @njit
    def two(buf, o, n):
        return array_view(buf, o, (n, 3))

    @njit
    def three(buf, o, n, m):
        return array_view(buf, o, (n, m, 2))

    for buf in (np.arange(100.0), np.arange(100, dtype=np.int64)):
        for compiled, expected in ((one(buf, 7, 5), array_view(buf, 7, 5)),
                                   (two(buf, 3, 4), array_view(buf, 3, (4, 3))),
                                   (three(buf, 11, 2, 5), array_view(buf, 11, (2, 5, 2))),
                                   (two(buf, 90, 0), array_view(buf, 90, (0, 3)))):
            assert compiled.dtype == buf.dtype and compiled.shape == expected.shape
            assert compiled.strides == expected.strides
            assert compiled.flags.c_contiguous
            if compiled.size:
                assert compiled.ctypes.data == expected.ctypes.data
            np.testing.assert_array_equal(compiled, expected)


def test_array_at_gives_back_in_a_kernel_the_arrays_addresses_of_took():
    """The step kernels get their buffers as (address, length) pairs: array_at rebuilds each
    array in place (a write lands in the original), of its length and dtype."""
    from mbsim_ros._kernel_cache import kernel
    from mbsim_ros.dynamics.views import addresses_of, array_at

    @kernel()
    def add_last_int_to_last_float(world):
        f, i = array_at(world, 0, np.float64), array_at(world, 1, np.int64)
        f[f.shape[0] - 1] += i[i.shape[0] - 1]
        return f.shape[0] * 10 + i.shape[0]

    floats, ints = np.arange(5.0), np.arange(3, dtype=np.int64) * 7
    assert add_last_int_to_last_float(addresses_of((floats, ints))) == 53
    assert floats.tolist() == [0.0, 1.0, 2.0, 3.0, 18.0] and ints.tolist() == [0, 7, 14]
    with pytest.raises(AssertionError, match="1-D C-contiguous"):
        addresses_of((np.zeros((3, 2))[:, 0],))
