"""Kernel calls past the dispatcher's per-call typing, for the calls users make in loops.

A kernel's dispatcher types every argument on every call to pick the machine code for those
types: about 0.2 us for the functional API's seven arrays and 0.9 us for the step's bundles of
arrays on SR1, beside kernels of 5 to 20 us. A call site whose argument types never change
pays that once: DirectCall finds the machine code's entry on its first call (compiling it or
loading it from the kernel cache, as the dispatcher would) and calls that entry from then on.

The entry reads every argument as the type it was compiled for and checks nothing: each call
through one DirectCall must pass what its first call passed, arrays of the same dtype, number
of dimensions and contiguity (checked by the caller, as api.as_vector does, or the caller's own
buffers), scalars of the same kind, None where None was. A read-only array may stand where the
first call had a writable one if the kernel only reads it.

(This file names no JIT library, so that editing it keeps the kernel cache: see
_kernel_cache.sources_digest.)
"""


class DirectCall:
    """`call(*args)` runs `kernel` on args; all calls pass the argument types of the first."""
    __slots__ = ("kernel", "call")

    def __init__(self, kernel):
        self.kernel = kernel
        self.call = self._first

    def _first(self, *args):
        kernel = self.kernel
        entry = kernel.compile(tuple(kernel.typeof_pyval(a) for a in args))
        self.call = entry
        return entry(*args)
