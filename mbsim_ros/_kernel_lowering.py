"""How our kernels lower to LLVM IR: numba's lowering with fewer stack slots.

numba gives each variable a stack slot (an alloca: stored when assigned, loaded when read)
unless it is assigned once and read only in the block that assigns it. Every other variable,
every argument first, is loaded from its slot at each read: for a carved namedtuple of about a
hundred arrays (~560 scalars), each `t.parent` loads the whole struct. LLVM's SROA pass then
splits those slots and loads field by field: most of the time of the passes run on each function
as it is lowered.

Here a variable assigned once whose assignment comes before every read in the order numba lowers
the blocks (by label), in a block that dominates every block reading it, is an SSA value instead:
that is the case of the arguments (assigned in the entry block) and of most variables numba's SSA
pass leaves. LLVM gets the same program without the slots (numba's own rule is the special case
of one block); a variable that does not qualify keeps its slot. A cold compile of the bundled
world: those passes ~9 -> ~4 CPU s, the whole ~9 CPU s less (bench/README.md); the machine code
runs as fast.
"""
from collections import defaultdict

from ._kernel_memo import memo

_pass = []


def stack_free_variables(blocks) -> set:
    """The names of the variables of a function's numba IR `blocks` (label -> ir.Block) that
    can be SSA values: assigned once, in a block that dominates and precedes (by label) every
    other block that reads or deletes them, and not read in their own block before the
    assignment (a loop-carried read)."""
    from numba.core import ir
    from numba.core.analysis import compute_cfg_from_blocks, compute_use_defs, must_use_alloca

    assigned = {}                    # name -> label of its one assignment, None if more
    deleted = defaultdict(set)
    for label, block in blocks.items():
        for stmt in block.body:
            if isinstance(stmt, ir.Assign):
                name = stmt.target.name
                assigned[name] = None if name in assigned else label
            elif isinstance(stmt, ir.Del):
                deleted[stmt.value].add(label)
    read = defaultdict(set)          # name -> blocks that read it before assigning it
    for label, names in compute_use_defs(blocks).usemap.items():
        for name in names:
            read[name].add(label)
    first, last = _dominator_intervals(compute_cfg_from_blocks(blocks))
    slots = must_use_alloca(blocks)
    free = set()
    for name, d in assigned.items():
        if d is None or name in slots or d in read[name] or d not in first:
            continue
        if all(u > d and u in first and first[d] <= first[u] and last[u] <= last[d]
               for u in read[name] | (deleted[name] - {d})):
            free.add(name)
    return free


def _dominator_intervals(cfg):
    """Preorder number and the last preorder number below each reachable block in the
    dominator tree of `cfg`: d dominates u when first[d] <= first[u] and last[u] <= last[d]."""
    children = defaultdict(list)
    for node, parent in cfg.immediate_dominators().items():
        if node != parent:
            children[parent].append(node)
    first, last = {}, {}
    stack = [(cfg.entry_point(), False)]
    while stack:
        node, done = stack.pop()
        if done:
            last[node] = len(first) - 1
            continue
        first[node] = len(first)
        stack.append((node, True))
        stack.extend((child, False) for child in children[node])
    return first, last


def lowering_pass():
    """numba's NativeLowering pass with the lowering above (a registered numba pass class)."""
    if _pass:
        return _pass[0]
    from numba.core import lowering, typed_passes
    from numba.core.compiler_machinery import register_pass

    class KernelLower(lowering.Lower):
        def _find_singly_assigned_variable(self):
            self._singly_assigned_vars = (set() if self.func_ir.func_id.is_generator
                                          else stack_free_variables(self.func_ir.blocks))
            self._blk_local_varmap = {}

    @register_pass(mutates_CFG=True, analysis_only=False)
    class KernelLowering(typed_passes.NativeLowering):
        _name = "kernel_lowering"

        @property
        def lowering_class(self):
            return KernelLower

    _pass.append(KernelLowering)
    return KernelLowering


def install_lowering_lookups():
    """Lookups numba repeats while lowering, remembered.
    - an LLVM type's size, for good (per target context, whose data layout is fixed): llvmlite
      makes and parses a module of one global to find it, and numba's lowering asks for the size
      of each user variable's stack slot, for debug info that is off (3.3 % of the samples of a
      cold compile of the bundled world, 0.8 % with this).
    The others in the compile's memo (_kernel_memo) while a kernel compiles (~2 CPU s):
    - each use of an array's fields (`a[i]`, `a.shape`...) asks the target context for the
      type's `__array__` lowering (what makes an array of a wrapper type), which plain arrays
      lack: the lookup failed, made the context reload its registries and failed again, ~3600
      times. A failed lookup now fails at once.
    - each use of an operation's lowering asks whether the implementation takes a `loc`
      argument, by Python's inspect.signature (~13 000 times): now once per implementation."""
    from numba.core import base
    if not hasattr(base.BaseContext.get_function, "numbas"):
        numbas_get_function, numbas_has_loc = base.BaseContext.get_function, base._has_loc

        def get_function(self, fn, sig, _firstcall=True):
            known = memo()
            if known is None or not (isinstance(fn, str) and fn == "__array__"):
                return numbas_get_function(self, fn, sig, _firstcall)
            key = "no __array__", id(self), sig
            if key in known:
                raise NotImplementedError(f"No definition for lowering {fn}{sig}")
            try:
                return numbas_get_function(self, fn, sig, _firstcall)
            except NotImplementedError:
                known[key] = True
                raise

        def has_loc(fn):
            known = memo()
            try:
                if known is not None and ("takes loc", fn) in known:
                    return known["takes loc", fn]
            except TypeError:           # an unhashable implementation
                return numbas_has_loc(fn)
            answer = numbas_has_loc(fn)
            if known is not None:
                known["takes loc", fn] = answer
            return answer

        numbas_get_abi_sizeof = base.BaseContext.get_abi_sizeof

        def get_abi_sizeof(self, ty):
            text = str(ty)          # a type's text is its whole structure, but a named struct's
            if "%" in text:         # (a body of its own, which may change)
                return numbas_get_abi_sizeof(self, ty)
            sizes = self.__dict__.setdefault("abi_sizes", {})     # the context's data layout
            size = sizes.get(text)
            if size is None:
                size = sizes[text] = numbas_get_abi_sizeof(self, ty)
            return size
        get_function.numbas = numbas_get_function
        get_abi_sizeof.numbas = numbas_get_abi_sizeof
        base.BaseContext.get_function = get_function
        base.BaseContext.get_abi_sizeof = get_abi_sizeof
        base._has_loc = has_loc
