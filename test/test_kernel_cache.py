"""Cached numba kernels live in a directory per version of the package's numba sources."""
import os

import numba

import mbsim_ros

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


def test_a_file_of_kernels_that_does_not_name_numba_is_a_numba_source_too(tmp_path):
    """lcp.py defines its kernels with our decorator alone; the step kernel inlines them, so an
    edit of it must give the step a fresh cache (else its stale machine code is loaded)."""
    solver = tmp_path / "solver.py"
    solver.write_text("from ._kernel_cache import kernel\n\n\n@internal\ndef f(x):\n    return x\n")
    before = sources_digest(tmp_path)
    solver.write_text("from ._kernel_cache import kernel\n\n\n@internal\ndef f(x):\n    return 2 * x\n")
    assert sources_digest(tmp_path) != before
    (tmp_path / "notes.py").write_text("# @internal is a decorator name, in a comment\n")
    edited = sources_digest(tmp_path)
    (tmp_path / "notes.py").write_text("# @internal is a decorator name, in an edited comment\n")
    assert sources_digest(tmp_path) == edited


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
    """_kernel_cache.py sets the kernels' compile options (no reference counting) and
    _kernel_lowering.py how they lower: kernels compiled otherwise are not loaded into the same
    process as new ones."""
    import mbsim_ros._kernel_cache as kc
    assert [p.name for p in kc.COMPILE_SOURCES] == ["_kernel_cache.py", "_kernel_lowering.py"]
    assert all(p.is_file() for p in kc.COMPILE_SOURCES)
    (tmp_path / "dyn").mkdir()
    (tmp_path / "dyn" / "k.py").write_text("import numba\n")
    before = sources_digest(tmp_path, ("dyn",))
    seen = {before}
    for k, source in enumerate(kc.COMPILE_SOURCES):
        edited = tmp_path / f"edited{k}.py"
        edited.write_text(source.read_text() + "\n# another option\n")
        sources = list(kc.COMPILE_SOURCES)
        sources[k] = edited
        with monkeypatch.context() as m:
            m.setattr(kc, "COMPILE_SOURCES", tuple(sources))
            seen.add(sources_digest(tmp_path, ("dyn",)))
    assert len(seen) == 3
    assert sources_digest(tmp_path, ("dyn",)) == before


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


KERNELS = """
from mbsim_ros._kernel_cache import kernel

@kernel(python=False)
def twice(a, k):
    for j in range(a.shape[0]):
        a[j] *= 2.0
    return a[k]

@kernel()
def first(a):
    return twice(a, 0)

@kernel()
def last(a):
    return twice(a, a.shape[0] - 1) + 1.0
"""

LOAD = """
import json, sys
import numba
import numpy as np
from llvmlite import binding as ll
numba.config.CACHE_DIR = sys.argv[1]
sys.path[:0] = [sys.argv[2], sys.argv[3]]
import kernels_here as k
out = dict(value=k.ENTRY(np.arange(3.0)))
(twice,) = k.twice.overloads.values()
obj = twice.library._compiled_object      # numba keeps it until the engine loads it (a cached kernel's)
if obj is not None:
    out["twice_text"] = sum(s.size() for s in ll.ObjectFileRef.from_data(obj).sections() if b"text" in (s.name() or b""))
out["twice_hits"] = sum(k.twice.stats.cache_hits.values())
print(json.dumps(out))
"""


REPO = os.path.dirname(os.path.dirname(mbsim_ros.__file__))     # the package under test, for the children


def test_a_kernel_only_kernel_makes_no_machine_code_and_callers_link_it_from_the_cache(tmp_path):
    """A kernel(python=False) keeps its LLVM IR for its callers and compiles no code of its own
    (its object code, cached, has no machine code in its text sections); a caller compiled in a later process links
    the callee's IR loaded from the cache, and runs."""
    import json
    import subprocess
    import sys
    (tmp_path / "kernels_here.py").write_text(KERNELS)

    def run(entry):
        script = LOAD.replace("ENTRY", entry)
        out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "cache"), str(tmp_path), REPO],
                             capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    compiled = run("first")
    assert compiled["value"] == 0.0 and compiled["twice_hits"] == 0 and compiled["twice_text"] == 0
    loaded = run("last")
    assert loaded["value"] == 5.0 and loaded["twice_hits"] == 1


def test_an_entry_kernels_linked_in_functions_lose_their_unread_arguments_and_get_a_name_of_its_own():
    """_drop_dead_arguments on a module like an entry kernel's after linking: the linked-in
    callee drops the argument it never reads and is renamed after the kernel's own functions
    (linkonce_odr again); the kernel's own function keeps its name, linkage and arguments."""
    from llvmlite import binding as ll

    from mbsim_ros._kernel_cache import _drop_dead_arguments

    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    module = ll.parse_assembly("""
        define linkonce_odr i64 @callee(i64 %used, i64 %unread) noinline {
          ret i64 %used
        }
        define i64 @entry(i64 %a, i64 %b) {
          %x = call i64 @callee(i64 %a, i64 %b)
          ret i64 %x
        }
    """)
    tm = ll.Target.from_default_triple().create_target_machine()
    _drop_dead_arguments(module, {"entry"}, tm)
    module.verify()
    functions = {f.name: f for f in module.functions}
    entry = functions.pop("entry")
    assert len(list(entry.arguments)) == 2 and entry.linkage == ll.Linkage.external
    [(name, callee)] = functions.items()
    assert name.startswith("callee.") and callee.linkage == ll.Linkage.linkonce_odr
    assert len(list(callee.arguments)) == 1


TWIN_KERNELS = """
from mbsim_ros._kernel_cache import kernel

@kernel()
def scaled(a, k):
    return a[k] * 3.0

@kernel()
def caller(a):
    return scaled(a, 1) + 1.0
"""

TWIN = """
import json, sys
import numba
import numpy as np
numba.config.CACHE_DIR = sys.argv[1]
sys.path[:0] = [sys.argv[2], sys.argv[3]]
from twin_kernels import caller, scaled
a = np.arange(3.0)
out = dict(caller=caller(a), entry_compiled_by_caller=len(scaled.signatures),
           twin_compiled=len(scaled.in_kernels.signatures))
out["entry"] = scaled(a, 2)
out["entry_compiled"] = len(scaled.signatures)
print(json.dumps(out))
"""


def test_a_kernel_calling_an_entry_kernel_links_its_kernel_only_twin(tmp_path):
    """A kernel that calls an entry kernel compiles the callee's kernel-only twin, not the
    entry (no entry wrappers, no machine code for it), and gets the callee's result; the entry
    compiles on its own first call from Python, with the same result."""
    import json
    import subprocess
    import sys
    (tmp_path / "twin_kernels.py").write_text(TWIN_KERNELS)
    out = subprocess.run([sys.executable, "-c", TWIN, str(tmp_path / "cache"), str(tmp_path), REPO],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == dict(caller=4.0, entry_compiled_by_caller=0, twin_compiled=1, entry=6.0, entry_compiled=1)


def test_numbas_flags_values_are_the_same_dict_made_quicker():
    """_quicker_target_config_values gives what numba's TargetConfig.values() is defined to
    give: every option's value, set or default, in the options' order."""
    from numba.core.compiler import Flags

    from mbsim_ros._kernel_cache import _quicker_target_config_values
    _quicker_target_config_values()
    flags = Flags()
    flags.nrt = True
    flags.no_cpython_wrapper = True
    flags.error_model = "numpy"
    for f in (Flags(), flags, Flags(copy_from=flags)):
        expected = {k: getattr(f, k) for k in f.options}
        assert list(f.values().items()) == list(expected.items())
    assert flags != Flags() and Flags(copy_from=flags) == flags


def test_kernels_compile_with_fewer_collections_and_restore_the_collector():
    import gc

    from mbsim_ros._kernel_cache import FULL_COLLECTIONS, YOUNG_COLLECTION, _fewer_collections
    before = gc.get_threshold()
    during = (YOUNG_COLLECTION, 10, FULL_COLLECTIONS)
    try:
        gc.set_threshold(700, 10, 10)
        with _fewer_collections():
            assert gc.get_threshold() == during
            with _fewer_collections():         # nested: unchanged
                assert gc.get_threshold() == during
            assert gc.get_threshold() == during
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(20000, 10, 5000)             # the user's own higher setting stays
        with _fewer_collections():
            assert gc.get_threshold() == (20000, 10, 5000)
        gc.set_threshold(700, 10, 5000)               # ... and a lower one is raised alone
        with _fewer_collections():
            assert gc.get_threshold() == (YOUNG_COLLECTION, 10, 5000)
        assert gc.get_threshold() == (700, 10, 5000)
    finally:
        gc.set_threshold(*before)


def test_function_passes_take_numbas_stack_slots_to_registers_and_skip_declarations():
    """_simplify_functions (-O1) on a function the way numba lowers one, its value kept in a
    stack slot: the slot is gone (what the entry kernel's -O3 would otherwise have to do for
    every function it links); a declaration in the module is left as it is."""
    from llvmlite import binding as ll
    from numba.core.registry import cpu_target

    from mbsim_ros._kernel_cache import _simplify_functions
    module = ll.parse_assembly("""
        declare double @elsewhere(double)
        define double @f(double %x) {
          %slot = alloca double
          store double %x, double* %slot
          %y = load double, double* %slot
          %z = fadd double %y, 1.0
          ret double %z
        }
    """)
    _simplify_functions(cpu_target.target_context.codegen(), module)
    module.verify()
    text = str(module.get_function("f"))
    assert "alloca" not in text and "load" not in text and "fadd double %x" in text
    assert module.get_function("elsewhere").is_declaration


def test_remembered_operator_typing_is_numbas_own():
    """_remember_operator_typing: an operator on numbers, arrays and tuples of them types as
    numba's own typing does, and the second time from memory; other calls (a list) still go
    through numba's typing each time."""
    import operator

    from numba.core import types
    from numba.core.registry import cpu_target
    from numba.core.types.functions import Function

    from mbsim_ros._kernel_cache import _remember_operator_typing
    _remember_operator_typing()
    context = cpu_target.typing_context
    context.refresh()
    numbas = Function.get_call_type.numbas
    a2, a1 = types.Array(types.float64, 2, "C"), types.Array(types.int64, 1, "C")
    cases = [(operator.getitem, (a2, types.UniTuple(types.int64, 2))), (operator.getitem, (a2, types.int64)),
             (operator.getitem, (a1, types.slice2_type)),
             (operator.getitem, (types.UniTuple(types.float64, 3), types.IntegerLiteral(1))),
             (operator.setitem, (a2, types.UniTuple(types.int64, 2), types.float64)),
             (operator.add, (types.int64, types.float64)), (operator.truediv, (types.int64, types.int64)),
             (operator.lt, (types.float64, types.int32))]
    for op, args in cases:
        function = context.resolve_value_type(op)
        expected = numbas(function, context, args, {})
        got = function.get_call_type(context, args, {})
        assert got == expected and got.return_type == expected.return_type, (op, args)
        assert function.get_call_type(context, args, {}) is got
    listed = (types.List(types.float64, reflected=False), types.int64)
    getitem = context.resolve_value_type(operator.getitem)
    assert getitem.get_call_type(context, listed, {}) is not getitem.get_call_type(context, listed, {})


def _sum_of_squares(a):
    s = 0.0
    for x in a:
        s += x * x
    return s


def test_kernels_compile_without_llvm_lock_callbacks_and_give_them_back(tmp_path, monkeypatch):
    """numba broadcasts an event each time LLVM's lock is taken; not while our kernels compile,
    and its callbacks are back after the compile."""
    import numpy as np
    from llvmlite import binding as ll
    from llvmlite.binding import ffi
    from numba.core import event

    from mbsim_ros._kernel_cache import kernel
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    before = list(ffi.lib._lock._cblist)
    assert before                   # numba's own
    locks = []
    numbas = event.start_event

    def start_event(kind, data=None):
        if kind == "numba:llvm_lock":
            locks.append(kind)
        return numbas(kind, data)
    monkeypatch.setattr(event, "start_event", start_event)
    compiled = kernel()(_sum_of_squares)
    assert compiled(np.arange(4.0)) == 14.0         # compiled, LLVM called many times
    assert locks == []
    assert ffi.lib._lock._cblist == before
    ll.parse_assembly("")           # outside a compile numba hears of the lock again
    assert locks
