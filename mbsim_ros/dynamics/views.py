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

addresses_of(buffers) / array_at(addresses, k, dtype): many arrays passed to a kernel as one
int64 array of (address, length) pairs and rebuilt inside it (the step kernels' `world`): a
call from Python unpacks one array instead of each.
"""
import numpy as np
from numba.core import cgutils, types
from numba.core.extending import _Intrinsic, intrinsic


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


def addresses_of(buffers):
    """The int64 array of (data address, length) pairs of `buffers` (1-D C-contiguous arrays),
    which array_at turns back into the arrays inside a kernel. The addresses are valid while
    the buffers live: whoever passes them keeps the buffers."""
    out = np.empty(2 * len(buffers), np.int64)
    for k, b in enumerate(buffers):
        assert b.ndim == 1 and b.flags.c_contiguous, "addresses_of takes 1-D C-contiguous arrays"
        out[2 * k], out[2 * k + 1] = b.ctypes.data, b.size
    return out


@intrinsic
def array_at(typingctx, addresses, k, dtype):
    """In a kernel: the k-th array of addresses_of(...) as a 1-D C-contiguous array of dtype
    (np.float64 or np.int64, as it was), its header only."""
    item = dtype.instance_type
    array = types.Array(item, 1, "C")

    def codegen(context, builder, sig, args):
        src = context.make_array(sig.args[0])(context, builder, args[0])
        at = builder.mul(context.cast(builder, args[1], sig.args[1], types.intp),
                         context.get_constant(types.intp, 2))
        address = builder.load(builder.gep(src.data, [at]))
        length = builder.load(builder.gep(src.data, [builder.add(at, context.get_constant(types.intp, 1))]))
        data_type = context.get_data_type(item)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(data_type))
        out = context.make_array(array)(context, builder)
        intp = context.get_value_type(types.intp)
        context.populate_array(out, data=builder.inttoptr(address, data_type.as_pointer()),
                               shape=cgutils.pack_array(builder, [length], intp),
                               strides=cgutils.pack_array(builder, [itemsize], intp), itemsize=itemsize,
                               meminfo=None)
        return out._getvalue()
    return array(addresses, k, dtype), codegen
