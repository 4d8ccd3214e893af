"""How kernels compile (_kernel_lowering, _kernel_inlining): which variables become SSA values,
that kernels lowered so compute what Python computes, that an inlined helper's IR is made once
per compile and its copies share one scope, and that a missing `__array__` lowering is looked up
once per compile, as is whether an operation's lowering takes `loc`."""
import sys

import numba
import numpy as np
import pytest
from numba.core.compiler import run_frontend

from mbsim_ros import _kernel_lowering
from mbsim_ros._kernel_cache import kernel


def patterns(a, n):
    s = 0.0                 # assigned before and in the loop: a slot
    k = n * 2               # assigned in the entry block, read in the loop: an SSA value
    last = 0.0
    for i in range(n):
        s += a[i] * k
        last = a[i]         # read after the loop, which may not run: a slot
    if n > 1:
        b = a[1] * 2.0      # assigned once in a branch, read there and in a block inside it
        if b > 0:
            s += b
    if n > 3:
        d = a[0]            # assigned once, read in a block its own does not dominate: a slot
    if n > 3:
        s += d
    return s + last


def test_ssa_values_are_single_assignments_that_dominate_and_precede_their_reads():
    free = _kernel_lowering.stack_free_variables(run_frontend(patterns).blocks)
    assert {"a", "n", "k", "b"} <= free
    assert not {"s", "last", "d"} & free


def test_a_kernel_lowered_with_fewer_slots_computes_what_python_computes(monkeypatch, tmp_path):
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))       # compiled here, not loaded
    seen = []
    rule = _kernel_lowering.stack_free_variables

    def recorded(blocks):
        free = rule(blocks)
        seen.append(free)
        return free
    monkeypatch.setattr(_kernel_lowering, "stack_free_variables", recorded)
    compiled = kernel()(patterns)
    a = np.array([3.0, -1.0, 2.0, 0.5, 4.0])
    for n in range(6):          # loop and branches taken or not
        assert compiled(a, n) == patterns(a, n)
    assert seen and {"a", "n"} <= seen[0]      # compiled through this lowering


@numba.njit(inline="always")
def _scaled_sum(x, y):
    z = 0.0
    for k in range(3):
        z += x * k + y
    return z


def _three_sites(x, y):
    return _scaled_sum(x, 1.0) + _scaled_sum(y, 2.0) * _scaled_sum(x, y)


def test_an_inlined_helper_is_made_once_per_compile_and_inlined_as_numba_would(monkeypatch, tmp_path):
    """numba's inliner runs the helper's untyped pipeline (bytecode to IR first) at each call
    site; while a kernel compiles, it runs once, and each site still gets the helper's code."""
    from numba.core.untyped_passes import TranslateByteCode
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    translated = []
    numbas = TranslateByteCode.run_pass

    def run_pass(self, state):
        translated.append(state.func_id.func_name)
        return numbas(self, state)
    monkeypatch.setattr(TranslateByteCode, "run_pass", run_pass)
    compiled = kernel()(_three_sites)
    f = _scaled_sum.py_func
    for x, y in ((2.0, 3.0), (-1.5, 0.25)):
        assert compiled(x, y) == f(x, 1.0) + f(y, 2.0) * f(x, y)
    assert translated.count("_scaled_sum") == 1            # three call sites, one translation


def test_the_blocks_of_an_inlined_copy_share_one_copy_of_the_scope(monkeypatch, tmp_path):
    """numba copies an inlined helper's IR block by block, each with a copy of the whole scope;
    while a kernel compiles, one copy of the scope serves every block of a copy, the helper's own
    IR keeps its scope, the copies share its source locations, and the copy hooks are gone after
    the inlining."""
    from numba.core import ir
    from numba.core.inline_closurecall import InlineWorker
    from mbsim_ros import _kernel_inlining
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    _kernel_inlining.install_inlining()
    sharing = InlineWorker.inline_ir
    copies = []

    def inline_ir(self, caller_ir, block, i, callee_ir, *args, **kwargs):
        names = set(callee_ir.blocks[min(callee_ir.blocks)].scope.localvars._con)
        locs = {id(stmt.loc) for b in callee_ir.blocks.values() for stmt in b.body}
        out = sharing(self, caller_ir, block, i, callee_ir, *args, **kwargs)
        copies.append((out[0], locs))   # numba's unchanged copy of the helper's IR
        assert set(callee_ir.blocks[min(callee_ir.blocks)].scope.localvars._con) == names
        return out
    monkeypatch.setattr(InlineWorker, "inline_ir", inline_ir)
    compiled = kernel()(_three_sites)
    f = _scaled_sum.py_func
    assert compiled(2.0, 3.0) == f(2.0, 1.0) + f(3.0, 2.0) * f(2.0, 3.0)
    assert len(copies) == 3
    for c, locs in copies:
        assert len(c.blocks) > 1 and len({id(b.scope) for b in c.blocks.values()}) == 1
        copied = {id(stmt.loc) for b in c.blocks.values() for stmt in b.body}
        assert copied and copied <= locs        # the helper's own source locations
    assert "__deepcopy__" not in vars(ir.Block) and "__deepcopy__" not in vars(ir.Loc)


def _many_reads(a, b):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i] + a[i] - b[i] * a[0] + a[-1] * b[-1] - a[1] + b[1] * b[0] - a[2] * b[2]
    return s


def test_lookups_repeated_while_lowering_are_made_once_per_compile(monkeypatch, tmp_path):
    """Each read of an array's fields asks the target context for an `__array__` lowering that
    plain arrays lack (numba's failed lookup reloads the context's registries each time), and
    each operation's lowering is asked whether it takes `loc`. While a kernel compiles, both
    answers are remembered."""
    from numba.core.base import BaseContext
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    refreshes = []
    numbas = BaseContext.refresh

    def refresh(self):             # those of a failed `__array__` lookup (numba's get_function)
        if sys._getframe(1).f_locals.get("fn") == "__array__":
            refreshes.append(1)
        return numbas(self)
    monkeypatch.setattr(BaseContext, "refresh", refresh)
    inspected = []
    pysignature = numba.core.utils.pysignature

    def recorded(fn):               # whether an implementation takes `loc` (numba's _has_loc)
        if sys._getframe(1).f_code.co_name == "_has_loc":
            inspected.append(fn)
        return pysignature(fn)
    monkeypatch.setattr(numba.core.utils, "pysignature", recorded)
    compiled = kernel()(_many_reads)
    a, b = np.arange(1.0, 6.0), np.linspace(-1.0, 2.0, 5)
    assert compiled(a, b) == _many_reads(a, b)
    assert len(refreshes) == 1         # one array type (a and b): one failed lookup
    assert inspected and len(inspected) == len(set(inspected))     # each implementation once
    with pytest.raises(NotImplementedError):     # outside a compile numba's lookup, as before
        compiled.targetctx.get_function("__array__", numba.core.typing.signature(numba.float64[:], numba.float64[:]))


def test_an_llvm_types_size_is_worked_out_once_and_as_llvmlite_does(monkeypatch, tmp_path):
    """llvmlite parses a module to size an LLVM type, and numba's lowering sizes each user
    variable's stack slot: each type is sized once, and its size is llvmlite's."""
    from llvmlite import ir
    from numba.core.registry import cpu_target
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    context = cpu_target.target_context
    monkeypatch.setattr(context, "abi_sizes", {}, raising=False)    # as in a fresh process
    sized = []
    llvmlites = ir.Type.get_abi_size

    def get_abi_size(self, target_data, context=None):
        sized.append((str(self), llvmlites(self, target_data, context)))
        return sized[-1][1]
    monkeypatch.setattr(ir.Type, "get_abi_size", get_abi_size)
    compiled = kernel()(_many_reads)
    a, b = np.arange(1.0, 6.0), np.linspace(-1.0, 2.0, 5)
    assert compiled(a, b) == _many_reads(a, b)
    texts = [text for text, _ in sized]
    assert texts and len(texts) == len(set(texts))
    assert context.abi_sizes == dict(sized)
    def pair():                   # a new type each call, of the same text: sized once
        return ir.LiteralStructType([ir.IntType(8), ir.DoubleType()])
    assert context.get_abi_sizeof(pair()) == context.get_abi_sizeof(pair()) == 16
    assert texts + ["{i8, double}"] == [text for text, _ in sized]
