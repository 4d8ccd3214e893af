"""Keep numba's on-disk kernel cache consistent across source files.

numba keys a cached kernel on its own source file only. A kernel that calls code from another
file (the step kernel calls collision, constraint and LCP kernels) would load stale machine
code after that other file changed, and a stale buffer layout crashes the process. So the
kernels cache into a directory named after a hash of all the package's numba sources: a
changed source means a fresh directory, and a process still running old sources keeps
writing into the old one (deleting caches instead races with such a process).
"""
import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).parent
KEEP = 3      # cache directories of older source versions kept (others may still use them)


def sources_digest(package: Path = PACKAGE) -> str:
    sources = sorted(p for p in package.rglob("*.py") if b"numba" in p.read_bytes())
    return hashlib.sha1(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]


def cache_root(package: Path = PACKAGE) -> Path:
    """Beside the sources when writable (a checkout), else per user (a system install)."""
    if os.access(package, os.W_OK):
        return package / "__pycache__" / "numba"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.access(base, os.W_OK) and not os.access(os.path.dirname(base), os.W_OK):
        base = tempfile.gettempdir()
    return Path(base) / "mbsim_ros" / "numba"


@contextlib.contextmanager
def kernel_cache(package: Path = PACKAGE):
    """While active, numba functions being defined cache under this source version's directory."""
    from numba.core import config
    root = cache_root(package)
    directory = root / sources_digest(package)
    _prune(root, keep=directory)
    previous = config.CACHE_DIR
    config.CACHE_DIR = str(directory)
    try:
        yield directory
    finally:
        config.CACHE_DIR = previous


def _prune(root: Path, keep: Path):
    try:
        others = sorted((d for d in root.iterdir() if d.is_dir() and d != keep),
                        key=lambda d: d.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in others[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)
