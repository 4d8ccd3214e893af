"""Cached numba kernels live in a directory per version of the package's numba sources."""
import numba

import mbsim_ros.dynamics.kernels as kernels
from mbsim_ros._kernel_cache import KEEP, kernel_cache, sources_digest


def test_the_cache_directory_follows_the_numba_sources_only(tmp_path):
    (tmp_path / "sub").mkdir()
    kernels_py = tmp_path / "sub" / "kernels.py"
    kernels_py.write_text("import numba\n")
    (tmp_path / "plain.py").write_text("x = 1\n")
    with kernel_cache(package=tmp_path) as first:
        assert numba.config.CACHE_DIR == str(first)
    assert numba.config.CACHE_DIR != str(first)          # restored afterwards
    (tmp_path / "plain.py").write_text("x = 2\n")         # no numba in it: same cache
    with kernel_cache(package=tmp_path) as same:
        assert same == first
    kernels_py.write_text("import numba\n# edited\n")     # a numba source changed: a new cache
    with kernel_cache(package=tmp_path) as second:
        assert second != first and second.name == sources_digest(tmp_path)


def test_a_subpackage_cache_ignores_the_other_subpackages(tmp_path):
    for part in ("dyn", "render"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "k.py").write_text("import numba\n")
    with kernel_cache("dyn", package=tmp_path) as first:
        pass
    (tmp_path / "render" / "k.py").write_text("import numba\n# edited\n")
    with kernel_cache("dyn", package=tmp_path) as same:
        assert same == first and same.name.startswith("dyn-")
    (tmp_path / "dyn" / "k.py").write_text("import numba\n# edited\n")
    with kernel_cache("dyn", package=tmp_path) as second:
        assert second != first


def test_a_subpackage_cache_follows_how_kernels_compile_too(tmp_path, monkeypatch):
    """_kernel_cache.py sets the kernels' compile options (no reference counting): kernels
    compiled under other options are not loaded into the same process as new ones."""
    import mbsim_ros._kernel_cache as kc
    (tmp_path / "dyn").mkdir()
    (tmp_path / "dyn" / "k.py").write_text("import numba\n")
    before = sources_digest(tmp_path, ("dyn",))
    decorator = tmp_path / "decorator.py"
    decorator.write_text(open(kc.__file__).read() + "\n# another option\n")
    monkeypatch.setattr(kc, "__file__", str(decorator))
    assert sources_digest(tmp_path, ("dyn",)) != before


def test_old_cache_directories_are_pruned_to_a_few(tmp_path):
    (tmp_path / "k.py").write_text("import numba\n")
    with kernel_cache(package=tmp_path) as current:
        root = current.parent
    for k in range(KEEP + 3):
        (root / f"old{k}").mkdir(parents=True)
    with kernel_cache(package=tmp_path):
        pass
    assert len([d for d in root.iterdir() if d.is_dir()]) <= KEEP + 1


def test_the_package_kernels_cache_under_their_source_version():
    assert sources_digest(parts=("dynamics",)) in kernels.aba._cache._cache_path    # numba's cache locator
