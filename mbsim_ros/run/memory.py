"""The process's memory over a long run.

glibc serves a block above its mmap threshold by a mapping of its own, returned to the system
when freed, but by default it raises that threshold to the size of every such block freed
(M_MMAP_THRESHOLD's dynamic adjustment). After the first camera frame or bag chunk is freed,
blocks of that size come from the heap, and a heap whose top is held by a small live block cannot
give them back: the RSS of an hour's run steps up each time a burst of frames is queued and never
comes down. A fixed threshold keeps every large block a mapping of its own.
"""
import ctypes

M_MMAP_THRESHOLD = -3           # glibc's malloc.h
LARGE_BLOCK = 1 << 20           # bytes: camera images, depth frames and bag chunks are above


def map_large_blocks(threshold=LARGE_BLOCK):
    """Blocks of `threshold` bytes or more are mapped on their own (and returned when freed)
    for the rest of the process. True where glibc took it; False on another C library."""
    try:
        return bool(ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, int(threshold)))
    except AttributeError:
        return False


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                       "fsmblks", "uordblks", "fordblks", "keepcost")]


def mallinfo():
    """glibc's mallinfo2() (bytes: uordblks + hblkhd live, fordblks free in the heaps, hblkhd
    in blocks mapped on their own), or None on another C library."""
    try:
        call = ctypes.CDLL(None).mallinfo2
    except AttributeError:
        return None
    call.restype = MallInfo2
    return call()
