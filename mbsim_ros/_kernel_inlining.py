"""numba inlines our @inline helpers at each call site by running its whole untyped pipeline
(bytecode to IR, rewrites, the helper's own inlining) over the helper again, ~150 times in a cold
compile of the bundled world for ~75 helpers. While kernels compile, the helper's IR is made
once per compile and each call site gets it under a fresh function identity (the inliner names
the variables it adds after it), as numba's own run would give it; numba's inliner copies the IR
before it changes anything.

numba copies the helper's IR block by block, each block on its own, and each copy of a block
copied the helper's whole scope (every variable) again, to be merged back into one scope by
equality: while kernels compile, the blocks of one copy share one copy of the scope (the
inlining took ~1/3 less time), and the copies share the source locations (values nothing
changes) instead of copying one per statement and expression."""
import copy

from ._kernel_memo import memo


def install_inlining():
    """numba's inliner, with the helper's IR kept in the compile's memo (_kernel_memo) and its
    copies sharing one scope, while a kernel compiles (once)."""
    from numba.core import bytecode, ir
    from numba.core.inline_closurecall import InlineWorker
    if hasattr(InlineWorker.run_untyped_passes, "numbas"):
        return
    numbas = InlineWorker.run_untyped_passes

    def run_untyped_passes(self, func, enable_ssa=False):
        flags, known = self.flags, memo()
        if known is None or self.locals or flags is None:
            return numbas(self, func, enable_ssa)
        key = ("inlinee", func, enable_ssa, flags.enable_looplift, flags.force_pyobject, flags.no_rewrites,
               tuple(sorted(vars(flags.auto_parallel).items())), id(self.targetctx))
        if key not in known:
            known[key] = numbas(self, func, enable_ssa)
        flags.enable_ssa = enable_ssa           # as numba's run leaves the caller's flags
        func_ir = copy.copy(known[key])
        func_ir.func_id = bytecode.FunctionIdentity.from_function(func)
        return func_ir
    run_untyped_passes.numbas = numbas
    InlineWorker.run_untyped_passes = run_untyped_passes

    inline_ir = InlineWorker.inline_ir

    def same_loc(loc, copied):      # a source location is a value nothing changes: shared
        return loc

    def inline_ir_sharing_scopes(self, *args, **kwargs):
        if memo() is None:
            return inline_ir(self, *args, **kwargs)
        copies = {}         # id(scope) -> (scope, its copy): the scopes copied during this inlining

        def copy_block(block, copied):      # what copy.deepcopy does, the scope's copy shared
            scope = block.scope
            if id(scope) not in copies:
                copies[id(scope)] = (scope, copy.deepcopy(scope, copied))
            copied[id(scope)] = copies[id(scope)][1]
            new = ir.Block.__new__(ir.Block)
            copied[id(block)] = new
            new.__dict__.update(copy.deepcopy(block.__dict__, copied))
            return new
        ir.Block.__deepcopy__ = copy_block
        ir.Loc.__deepcopy__ = same_loc
        try:
            return inline_ir(self, *args, **kwargs)
        finally:
            del ir.Block.__deepcopy__, ir.Loc.__deepcopy__
    InlineWorker.inline_ir = inline_ir_sharing_scopes
