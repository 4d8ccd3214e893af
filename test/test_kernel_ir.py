"""numba's list_vars, replaced by a quicker walk (_kernel_ir): on the IR of real kernels and of
statements holding every kind of value, the same variables, the same objects, in the same order."""
import numba
from numba.core import ir
from numba.core.compiler import run_frontend

from mbsim_ros import _kernel_ir
from mbsim_ros.dynamics import kernels, step
from mbsim_ros.dynamics.collision import gjk_epa


def _every_list_vars(blocks):
    """[ids of list_vars()] of every statement and expression in `blocks`."""
    out = []
    for block in blocks.values():
        for stmt in block.body:
            out.append([id(v) for v in stmt.list_vars()])
            if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Inst):
                out.append([id(v) for v in stmt.value.list_vars()])
    return out


def _numbas(monkeypatch, blocks):
    stmt, expr = _kernel_ir._installed[0]
    with monkeypatch.context() as m:
        m.setattr(ir.Stmt, "list_vars", stmt)
        m.setattr(ir.Expr, "list_vars", expr)
        return _every_list_vars(blocks)


def _kwargs_and_tuples(a, n):
    b = dict(x=a, y=n)
    t = (a, (n, a), [a, n])
    s = a[1:n:2]
    try:
        c = max(a[0], n, key=None)
    except Exception:
        raise ValueError("no")
    return b, t, s, c


def test_the_quicker_walk_finds_what_numbas_finds(monkeypatch):
    _kernel_ir.quicker_list_vars()
    functions = (kernels.aba, step.step_semi_implicit_euler, gjk_epa._epa, _kwargs_and_tuples)
    for f in functions:
        blocks = run_frontend(getattr(f, "py_func", f)).blocks
        quick = _every_list_vars(blocks)
        assert sum(map(len, quick)) > 20
        assert quick == _numbas(monkeypatch, blocks), f


class _Holder:        # a value of a class the quick walk does not know: numba's walk looks inside
    pass


def test_the_quicker_walk_defers_to_numba_for_unknown_values(monkeypatch):
    _kernel_ir.quicker_list_vars()
    scope = ir.Scope(None, ir.Loc("f", 1))
    x, y, z = (scope.define(n, ir.Loc("f", 1)) for n in "xyz")
    call = ir.Expr.call(x, (y,), (("k", z),), ir.Loc("f", 2))
    stmt = ir.Assign(call, x, ir.Loc("f", 2))
    stmt.extra = {"a": [y, (z, _Holder())], "b": numba.float64}
    blocks = {0: ir.Block(scope, ir.Loc("f", 1))}
    blocks[0].body = [stmt, ir.Return(x, ir.Loc("f", 3))]
    quick = _every_list_vars(blocks)
    assert quick == _numbas(monkeypatch, blocks)
    assert sorted(v.name for v in stmt.list_vars()) == ["x", "x", "y", "y", "z", "z"]
