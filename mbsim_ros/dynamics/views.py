"""array_view(buf, offset, shape): the C-contiguous view of buf[offset:offset + prod(shape)] as
an array of that shape, for the carve_* functions that cut the kernels' buffers into fields.

In numba it only fills in the view's header (data pointer, shape, strides): no bounds check, no
slice clamping and no call to numba's reshape helper, which together cost each kernel call from
Python about 20 ns a view (~4 us for the ~200 views of a step, more than the rest of a call's
overhead). Every layout is checked once on the Python side, where the same carve code runs
through this function's numpy form (slicing and reshape, which raise on a size that does not
fit): the owners of the buffers assert that their carve uses exactly the buffer's length, and
test/dynamics/test_layouts.py checks each field's offset and length. buf is a 1-D C-contiguous
array; shape an integer or a tuple of integers.
"""
import numpy as np
from numba.core import cgutils, types
from numba.core.extending import _Intrinsic


def _numpy_view(buf, offset, shape):
    """The numpy form (the carve functions' py_func run this)."""
    return buf[offset:offset + int(np.prod(shape))].reshape(shape)


def _typing(typingctx, buf, offset, shape):
    ndim = len(shape) if isinstance(shape, types.BaseTuple) else 1
    view = types.Array(buf.dtype, ndim, "C")

    def codegen(context, builder, sig, args):
        buf_t, offset_t, shape_t = sig.args
        src = context.make_array(buf_t)(context, builder, args[0])
        out = context.make_array(view)(context, builder)
        if isinstance(shape_t, types.BaseTuple):
            dims = [context.cast(builder, builder.extract_value(args[2], i), t, types.intp)
                    for i, t in enumerate(shape_t)]
        else:
            dims = [context.cast(builder, args[2], shape_t, types.intp)]
        intp = context.get_value_type(types.intp)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(context.get_data_type(buf_t.dtype)))
        strides = [itemsize]                       # C order: the last axis varies fastest
        for d in reversed(dims[1:]):
            strides.insert(0, builder.mul(strides[0], d))
        data = builder.gep(src.data, [context.cast(builder, args[1], offset_t, types.intp)])
        context.populate_array(out, data=data, shape=cgutils.pack_array(builder, dims, intp),
                               strides=cgutils.pack_array(builder, strides, intp), itemsize=itemsize,
                               meminfo=src.meminfo, parent=src.parent)
        result = out._getvalue()
        if context.enable_nrt:         # a plain njit caller owns what a call returns (the kernels run without NRT)
            context.nrt.incref(builder, view, result)
        return result
    return view(buf, offset, shape), codegen


class _ViewIntrinsic(_Intrinsic):
    """A numba intrinsic that Python can call too (as the numpy form), so that one carve
    function serves both: numba types a call to it by the object, as any intrinsic."""

    def __call__(self, buf, offset, shape):
        return _numpy_view(buf, offset, shape)


array_view = _ViewIntrinsic("array_view", _typing)
array_view._register()
