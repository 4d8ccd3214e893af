"""Keep numba's on-disk kernel cache consistent across source files.

numba keys a cached kernel on its own source file only. A kernel that inlines or calls code
from another file (the step kernel calls collision, constraint and LCP kernels) would load
stale machine code after that other file changed, and a stale buffer layout crashes the
process. So all files that use numba are hashed together; when the hash changes, every cached
kernel of the package is dropped before any is loaded.
"""
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).parent
STAMP_NAME = "kernels.sha1"


def drop_stale_kernel_caches(package: Path = PACKAGE):
    sources = sorted(p for p in package.rglob("*.py") if b"numba" in p.read_bytes())
    digest = hashlib.sha1(b"".join(p.read_bytes() for p in sources)).hexdigest()
    caches = sorted({p.parent / "__pycache__" for p in sources})
    stamp = package / "__pycache__" / STAMP_NAME
    try:
        if stamp.read_text() == digest:
            return
    except OSError:
        pass
    try:
        for cache in caches:
            for f in cache.glob("*.nb[ic]"):
                f.unlink()
        stamp.parent.mkdir(exist_ok=True)
        stamp.write_text(digest)
    except OSError:
        # a read-only install: numba then caches per user, keyed by the freshly installed files
        pass
