"""Keep numba's on-disk kernel cache consistent across source files.

numba keys a cached kernel on its own source file only. A kernel that calls code from another
file (the step kernel calls collision, constraint and LCP kernels) would load stale machine
code after that other file changed, and a stale buffer layout crashes the process. So the
kernels cache into a directory named after a hash of the numba sources they can call: a
changed source means a fresh directory, and a process still running old sources keeps
writing into the old one (deleting caches instead races with such a process).

Each subpackage names the subpackages its kernels call (`kernel_cache("dynamics", "sensors")`),
so that editing the renderer does not throw away the step kernel's two-minute compile.
"""
import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).parent
KEEP = 3      # cache directories of older source versions kept (others may still use them)


def sources_digest(package: Path = PACKAGE, parts=()) -> str:
    """Hash of the numba sources under the given subpackages (all of the package if none)."""
    roots = [package / part for part in parts] or [package]
    sources = sorted(p for root in roots for p in root.rglob("*.py") if b"numba" in p.read_bytes())
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
def kernel_cache(*parts, package: Path = PACKAGE):
    """While active, numba functions being defined cache under the directory of this version of
    the sources in `parts` (subpackage names; all of the package if none)."""
    from numba.core import config
    root = cache_root(package)
    prefix = "-".join(parts) + "-" if parts else ""
    directory = root / (prefix + sources_digest(package, parts))
    _prune(root, keep=directory, prefix=prefix)
    previous = config.CACHE_DIR
    config.CACHE_DIR = str(directory)
    try:
        yield directory
    finally:
        config.CACHE_DIR = previous


def _prune(root: Path, keep: Path, prefix: str = ""):
    """Drop all but the KEEP newest other versions of the same subpackages' caches."""
    same = (lambda name: name.startswith(prefix)) if prefix else (lambda name: "-" not in name)
    try:
        others = sorted((d for d in root.iterdir() if d.is_dir() and d != keep and same(d.name)),
                        key=lambda d: d.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in others[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)
