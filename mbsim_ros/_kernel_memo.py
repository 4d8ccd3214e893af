"""What numba works out again and again within one compile (an inlined helper's IR, lookups of
lowering implementations), remembered in one dict until the outermost kernel compile ends: a
source may change between compiles, and so may numba's registries."""
import contextlib

_memo = []      # while a kernel compiles: [{key: what was worked out}]


@contextlib.contextmanager
def compile_memo():
    """The memo lives from the start to the end of the outermost kernel compile."""
    if _memo:
        yield
        return
    _memo.append({})
    try:
        yield
    finally:
        _memo.clear()


def memo():
    """The memo of the kernel compile in progress; None outside one."""
    return _memo[0] if _memo else None
