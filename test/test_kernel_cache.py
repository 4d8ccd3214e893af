"""Cached numba kernels are dropped when any numba source of the package changes."""
from mbsim_ros._kernel_cache import drop_stale_kernel_caches


def test_caches_survive_until_a_numba_source_changes(tmp_path):
    (tmp_path / "sub").mkdir()
    kernels = tmp_path / "sub" / "kernels.py"
    kernels.write_text("import numba\n")
    (tmp_path / "plain.py").write_text("x = 1\n")
    cache = tmp_path / "sub" / "__pycache__"
    cache.mkdir()
    cached = [cache / "kernels.step-1.py311.nbi", cache / "kernels.step-1.py311.1.nbc"]
    for f in cached:
        f.write_bytes(b"old")

    drop_stale_kernel_caches(tmp_path)          # first run: no stamp, so nothing is trusted
    assert not any(f.exists() for f in cached)

    for f in cached:
        f.write_bytes(b"new")
    drop_stale_kernel_caches(tmp_path)          # nothing changed: caches kept
    (tmp_path / "plain.py").write_text("x = 2\n")
    drop_stale_kernel_caches(tmp_path)          # a file without numba changed: caches kept
    assert all(f.exists() for f in cached)

    kernels.write_text("import numba\n# edited\n")
    drop_stale_kernel_caches(tmp_path)          # a numba source changed: caches dropped
    assert not any(f.exists() for f in cached)
