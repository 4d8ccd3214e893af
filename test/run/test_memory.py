"""run/memory.py: after map_large_blocks, a large block freed and allocated again is a mapping of
its own (returned to the system when freed), not heap memory that stays with the process.

Checked in fresh processes through glibc's own accounting (mallinfo2: hblkhd is the bytes in
mapped blocks). Without the call, glibc raises its mmap threshold when the first large block is
freed, so a later one comes from the heap: the same check fails, which shows it can. Each probe
tries three times and reports the fewest mapped bytes (with the call, every try must map)."""
import subprocess
import sys

import pytest

PROBE = r"""
import ctypes, importlib.util, sys
# run/memory.py alone, not the package: importing numba and the rest allocates and frees blocks
# of its own, which moved what this probe measures
spec = importlib.util.spec_from_file_location("memory", sys.argv[2])
memory = importlib.util.module_from_spec(spec)
spec.loader.exec_module(memory)
map_large_blocks, mallinfo = memory.map_large_blocks, memory.mallinfo
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "session":
    assert map_large_blocks()
size = 6 << 20
mapped = []
for _ in range(3):      # (a first block may come from a heap top left large by the start-up)
    libc.free(libc.malloc(size))      # a large block freed: glibc may raise its threshold here
    before = mallinfo().hblkhd
    block = libc.malloc(size)
    mapped.append(mallinfo().hblkhd - before)
    libc.free(block)
print(min(mapped))
"""


def mapped_bytes(mode):
    from mbsim_ros.run import memory
    out = subprocess.run([sys.executable, "-c", PROBE, mode, memory.__file__], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_large_blocks_stay_mapped():
    plain = mapped_bytes("plain")
    if plain != 0:      # seen in a few CI workers (cause not found): the check cannot tell there
        pytest.skip(f"glibc's default mapped the block here too ({plain} bytes): without the control "
                    "reproducing the heap reuse, this check cannot tell the call's effect")
    assert mapped_bytes("session") >= 6 << 20  # a mapping of its own, returned when freed
