"""numba inlines our @inline helpers at each call site by running its whole untyped pipeline
(bytecode to IR, rewrites, the helper's own inlining) over the helper again, ~150 times in a cold
compile of the bundled world for ~75 helpers. While kernels compile, the helper's IR is made
once per compile and each call site gets it under a fresh function identity (the inliner names
the variables it adds after it), as numba's own run would give it; numba's inliner copies the IR
before it changes anything."""
import contextlib
import copy

_remembered = []        # while a kernel compiles: {key: untyped IR of an inlined function}


@contextlib.contextmanager
def remembered_inlinees():
    """Remember the IR of inlined functions until the outermost kernel compile ends (a source
    may change between compiles)."""
    _install()
    if _remembered:
        yield
        return
    _remembered.append({})
    try:
        yield
    finally:
        _remembered.clear()


def _install():
    from numba.core import bytecode
    from numba.core.inline_closurecall import InlineWorker
    if hasattr(InlineWorker.run_untyped_passes, "numbas"):
        return
    numbas = InlineWorker.run_untyped_passes

    def run_untyped_passes(self, func, enable_ssa=False):
        flags = self.flags
        if not _remembered or self.locals or flags is None:
            return numbas(self, func, enable_ssa)
        key = (func, enable_ssa, flags.enable_looplift, flags.force_pyobject, flags.no_rewrites,
               tuple(sorted(vars(flags.auto_parallel).items())), id(self.targetctx))
        known = _remembered[0]
        if key not in known:
            known[key] = numbas(self, func, enable_ssa)
        flags.enable_ssa = enable_ssa           # as numba's run leaves the caller's flags
        func_ir = copy.copy(known[key])
        func_ir.func_id = bytecode.FunctionIdentity.from_function(func)
        return func_ir
    run_untyped_passes.numbas = numbas
    InlineWorker.run_untyped_passes = run_untyped_passes
