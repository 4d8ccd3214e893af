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
import functools
import hashlib
import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from ._kernel_inlining import install_inlining
from ._kernel_ir import quicker_list_vars
from ._kernel_lowering import install_lowering_lookups, lowering_pass
from ._kernel_memo import compile_memo

PACKAGE = Path(__file__).parent
# how kernels compile (the decorator's options, the lowering): a change is a new version of every cache
COMPILE_SOURCES = (Path(__file__), PACKAGE / "_kernel_lowering.py")
KEEP = 3      # cache directories of older source versions kept (others may still use them)


# a numba source: one that names the library, or defines kernels with our decorators (lcp.py
# and the collision files do without naming numba; left out, an edit of them kept the step
# kernel that inlines them, stale, in its old cache)
_NUMBA_SOURCE = re.compile(rb"numba|^@(kernel|internal|inline|batch_kernel)\b", re.MULTILINE)


def sources_digest(package: Path = PACKAGE, parts=()) -> str:
    """Hash of the numba sources under the given subpackages (all of the package if none)."""
    roots = [package / part for part in parts] or [package]
    sources = sorted(p for root in roots for p in root.rglob("*.py") if _NUMBA_SOURCE.search(p.read_bytes()))
    if parts:      # how kernels compile is part of every version
        sources += list(COMPILE_SOURCES)
    return hashlib.sha1(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]


def cache_root(package: Path = PACKAGE) -> Path:
    """$MBSIM_CACHE_DIR when set; else beside the sources when writable (a checkout, a pip or
    colcon install the user owns), else per user (a system install)."""
    override = os.environ.get("MBSIM_CACHE_DIR")
    if override:
        return Path(override)
    if os.access(package, os.W_OK):
        return package / "__pycache__" / "numba"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.access(base, os.W_OK) and not os.access(os.path.dirname(base), os.W_OK):
        base = tempfile.gettempdir()
    return Path(base) / "mbsim_ros" / "numba"


def kernel(python=True, **options):
    """The decorator of our numba kernels: njit(cache=True, nogil=True, **options), except that
    a kernel called from another with a constant argument compiles for the constant's plain
    type. numba types f(x, 0) with Literal[int](0) and compiles f once per constant it meets:
    apply_forces(..., True) in the step and apply_forces(..., False) in the sensors were two
    16-second compilations of one kernel. Calls from Python are typed as numba always does.

    Kernels compile without numba's reference counting (NRT): they work in the arrays they are
    given (allocating one inside is a compile error), so counting references to them is waste.
    Without it a call from Python no longer wraps every argument array (the step and the sensor
    kernel take about a hundred each) in a reference-counted holder: the node's step at rtf 0
    went from 178 to 140 us (bench/node.py), and the bundled world compiles ~5 CPU s faster.
    What comes with it:
    - a kernel is called from Python or from other kernels, never from a plain njit function
      (which would release the views that carve_* return: memory it does not own);
    - a kernel with a Python entry returns no array (without NRT numba would hand Python the
      whole array a returned view was cut from): such a kernel fails to compile (TypeError).

    python=False: a kernel only other kernels call (most take the carved namedtuples, about a
    hundred arrays). It compiles without numba's Python and C entry wrappers, which unpack every
    argument array and cost about half a CPU second of compile per such kernel, and without
    machine code of its own (_ir_only_compiler): its callers link its LLVM IR into theirs and
    optimize and generate the machine code there. Calling it from Python raises TypeError (it
    has no entry point to call).

    A kernel with a Python entry that other kernels call too (solve_boxed_lcp, eval_function)
    is two: calls from kernels go to a kernel-only twin (`in_kernels`), so the step compiles no
    entry wrappers and machine code for it; the entry compiles on its first call from Python."""
    from numba import njit
    _quicker_target_config_values()
    _remember_operator_typing()
    quicker_list_vars()

    def decorate(fn):
        if python:
            dispatcher = njit(cache=True, nogil=True, _nrt=False, pipeline_class=_entry_compiler(), **options)(fn)
            dispatcher.__class__ = _kernel_class(type(dispatcher), True)
            dispatcher.in_kernels = kernel(python=False, **options)(_renamed(fn, fn.__qualname__ + ".in_kernels"))
        else:
            dispatcher = njit(cache=True, nogil=True, _nrt=False, no_cpython_wrapper=True,
                              no_cfunc_wrapper=True, pipeline_class=_ir_only_compiler(), **options)(fn)
            dispatcher.__class__ = _kernel_class(type(dispatcher), False)
        dispatcher.get_call_template = functools.partial(_plain_call_template, dispatcher)
        return dispatcher
    return decorate


def _quicker_target_config_values():
    """numba's TargetConfig.values() (the compilation's flags as a dict), the same dict made
    without a property call per option. numba's typing keys each overload template's cache on
    the flags and compares them by values() at every lookup: resolving one `a[i]` tries a
    handful of getitem templates, ~4 values() calls each, ~500 000 calls in a cold compile of
    the bundled world (~3 CPU s)."""
    from numba.core import targetconfig
    if getattr(targetconfig.TargetConfig.values, "quicker", False):
        return
    defaults_of = {}

    def values(self):
        cls = type(self)
        defaults = defaults_of.get(cls)
        if defaults is None:
            defaults = defaults_of[cls] = {k: option.default for k, option in cls.options.items()}
        out = dict(defaults)
        for k, v in self._values.items():
            if k in out:
                out[k] = v
        return out
    values.quicker = True
    targetconfig.TargetConfig.values = values


def _remember_operator_typing():
    """numba types each `a[i]`, `a[i] = x`, `x + y`, `x < y`... on its own: it tries the
    operator's templates in turn (dozens for getitem), building an error for each that does not
    match, ~30 000 times in a cold compile of the bundled world. For numbers, arrays and tuples
    and slices of them the answer depends only on the argument types, the typing context and the
    compilation's flags (numba's own template caches key on these), so it is remembered on
    them: type inference 11.7 -> 5.5 CPU s, lowering (which types each getitem again) 23.7 ->
    20.7 s. Anything else (keywords, other types, other operators) is typed as before."""
    import operator

    from numba.core import targetconfig, types
    from numba.core.types.functions import Function
    if getattr(Function.get_call_type, "remembers", False):
        return
    type_call = Function.get_call_type
    operators = {operator.getitem, operator.setitem, operator.neg, operator.pos, operator.not_,
                 operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
                 operator.mod, operator.pow, operator.iadd, operator.isub, operator.imul,
                 operator.itruediv, operator.lt, operator.gt, operator.le, operator.ge,
                 operator.eq, operator.ne, operator.and_, operator.or_}
    plain = (types.Array, types.Number, types.Boolean, types.IntegerLiteral, types.BooleanLiteral,
             types.SliceType)

    def is_plain(t):
        if isinstance(t, types.BaseTuple):
            return all(is_plain(e) for e in t.types)
        return isinstance(t, plain)
    known = {}

    def get_call_type(self, context, args, kws):
        if kws or self.typing_key not in operators or not all(is_plain(a) for a in args):
            return type_call(self, context, args, kws)
        key = self, context, tuple(args), targetconfig.ConfigStack.top_or_none()
        signature = known.get(key)
        if signature is None:
            signature = known[key] = type_call(self, context, args, kws)
        return signature
    get_call_type.remembers = True
    get_call_type.numbas = type_call
    Function.get_call_type = get_call_type


def _renamed(fn, qualname):
    """A copy of function `fn` under another qualified name (numba names its cache files after
    it, so the copy's compilations do not overwrite fn's)."""
    import types
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = qualname
    copy.__module__ = fn.__module__
    return copy


_ir_only = []


def _ir_only_compiler():
    """numba's compiler (the pipeline class of njit) for kernels only other kernels call: their
    code library keeps the LLVM IR that callers link into their own and generates no machine
    code, which nothing would run (every caller compiles the callee's IR again into its own
    code: numba links callees as IR). Nor does it run LLVM's module passes over that IR and the
    kernels it links in: the entry kernel that links them all runs them once over everything
    (before, each kernel in between ran them over its whole subtree again, ~2/3 of the LLVM
    module pass time of a cold compile).

    The library still gives the execution engine a module of the function's environment
    globals (numba writes each function's environment pointer there after compiling and after
    loading from the cache), and caches that module's object code with the IR, in numba's
    object format: a cached kernel loads as numba loads any (the IR for linking, the small
    object code into the engine)."""
    if _ir_only:
        return _ir_only[0]
    import weakref

    from llvmlite import binding as ll
    from numba.core.codegen import JITCodeLibrary

    class IRCodeLibrary(JITCodeLibrary):
        def _optimize_functions(self, ll_module):
            _simplify_functions(self._codegen, ll_module)

        def _optimize_final_module(self):
            pass        # the entry kernel optimizes it with everything else it links

        def _finalize_final_module(self):
            self._finalize_dynamic_globals()
            self._verify_declare_only_symbols()
            envs = "\n".join(str(gv) for gv in self._final_module.global_variables
                             if gv.name.startswith("_ZN08NumbaEnv") and not gv.is_declaration)
            stub = ll.parse_assembly(str(self._codegen._create_empty_module(self.name + ".envs")) + envs)
            stub._CPUCodeLibrary__library = weakref.proxy(self)     # the object code hook's owner
            self._codegen._add_module(stub)
            self._codegen._engine.finalize_object()
            self._finalized = True

    _ir_only.append(_compiler_using(IRCodeLibrary))
    return _ir_only[0]


_entry = []


def _entry_compiler():
    """numba's compiler for kernels with a Python entry: before LLVM optimizes the kernel's
    module (its own functions and every kernel it calls, linked in), the linked-in functions
    lose the arguments they never read. numba passes a carved namedtuple as its arrays' fields
    one by one, ~700 scalars for a Tree and a Data, most unread (a view's reference-count
    pointers, its item size...): without this, each call of aba, integrate or collide in the step
    stored hundreds of them on the stack (the step with limits off 10.6 -> 9.0 us, ABA's kernel
    9.2 -> 7.7 us; the cold compile did not grow: bench/README.md).

    LLVM removes arguments only from functions no other module can see, so the linked-in
    functions become internal for the pass (_drop_dead_arguments), then get a name of this
    module's own (one definition per name across the execution engine's modules) and their
    linkonce_odr linkage back (internal ones would change what LLVM inlines, and the compile
    grew by a fifth). The kernel's own functions keep their names: numba finds its entry and
    wrappers by them."""
    if _entry:
        return _entry[0]
    from numba.core.codegen import JITCodeLibrary

    class EntryCodeLibrary(JITCodeLibrary):
        def __init__(self, codegen, name):
            super().__init__(codegen, name)
            self._own_functions = set()

        def add_llvm_module(self, ll_module):
            self._own_functions.update(f.name for f in ll_module.functions if not f.is_declaration)
            super().add_llvm_module(ll_module)

        def _optimize_functions(self, ll_module):
            _simplify_functions(self._codegen, ll_module)

        def _optimize_final_module(self):
            _drop_dead_arguments(self._final_module, self._own_functions, self._codegen._tm)
            super()._optimize_final_module()

    _entry.append(_compiler_using(EntryCodeLibrary))
    return _entry[0]


def _simplify_functions(codegen, ll_module):
    """The function passes numba runs on each function as it is lowered, at LLVM's -O1 where
    numba runs -O3: they only need to shrink numba's IR (its stack slots, loads and copies of
    whole structs) before it is linked; the entry kernel's module passes run the full -O3 over
    everything it links. Skipping them instead makes the module passes grow by more than they
    cost; at -O3 they cost more than they save (bench/README.md)."""
    ll_module.data_layout = codegen._data_layout
    passes, builder = codegen._function_pass_manager(opt=1)
    for function in ll_module.functions:
        if not function.is_declaration:
            passes.run(function, builder)


def _compiler_using(library_class):
    """numba's compiler (an njit pipeline class) whose code library is a `library_class`, with
    object caching on, as numba's own library is, whose lowering keeps fewer stack slots
    (_kernel_lowering), and which remembers what numba works out again and again until the
    outermost compile ends (_kernel_memo: inlined helpers, lowering lookups)."""
    from numba.core.compiler import Compiler
    from numba.core.typed_passes import NativeLowering

    kernel_lowering = lowering_pass()
    install_inlining()
    install_lowering_lookups()

    class KernelCompiler(Compiler):
        def define_pipelines(self):
            pipelines = super().define_pipelines()
            for pm in pipelines:      # numba's lowering, with fewer stack slots (_kernel_lowering)
                pm.passes = [(kernel_lowering if cls is NativeLowering else cls, what) for cls, what in pm.passes]
            return pipelines

        def compile_extra(self, func):
            if self.state.library is None:
                self.state.library = library_class(self.state.targetctx.codegen(), func.__qualname__)
                self.state.library.enable_object_caching()
            with _fewer_collections(), compile_memo():
                return super().compile_extra(func)
    return KernelCompiler


YOUNG_COLLECTION = 5000     # allocations (net) between two young collections while kernels compile
FULL_COLLECTIONS = 100      # middle-generation collections between two full ones, likewise


@contextlib.contextmanager
def _fewer_collections():
    """Python's cyclic collector, by default, collects its young generation every 700 net
    allocations and makes a full pass over the heap every 100 young collections (when a quarter
    of the heap is new): a compile keeps numba's IR of everything it compiled alive, so the heap
    grows and so does each full pass. While kernels compile, the young generation is collected
    every 5000 allocations and a full pass waits for 100 middle ones: a cold compile of the
    bundled world spends ~1.8 CPU s in the collector, not ~5 (~0.6 s per full pass), and peaks
    at ~600 MB, not ~500 (cyclic garbage waits longer)."""
    import gc
    before = gc.get_threshold()
    during = (max(before[0], YOUNG_COLLECTION), before[1], max(before[2], FULL_COLLECTIONS))
    if during == before:        # a compile in a compile, or the user's own higher setting
        yield
        return
    gc.set_threshold(*during)
    try:
        yield
    finally:
        gc.set_threshold(*before)


@contextlib.contextmanager
def _llvm_lock_without_callbacks():
    """numba asks llvmlite to call it back whenever the lock of LLVM's C API is taken and given
    back (before and after every call into LLVM, ~60 000 in a cold compile of the bundled world),
    to broadcast a "numba:llvm_lock" event to the timers each compile level installs (~9-20 us a
    call instead of ~1). While a kernel compiles or loads from the cache, the lock calls nobody
    back: those timers, which only feed numba's compile metadata, stay empty for our kernels."""
    from llvmlite.binding import ffi
    callbacks = list(getattr(getattr(ffi.lib, "_lock", None), "_cblist", ()))
    for acquired, released in callbacks:
        ffi.unregister_lock_callback(acquired, released)
    try:
        yield
    finally:
        for acquired, released in callbacks:
            ffi.register_lock_callback(acquired, released)


def _drop_dead_arguments(module, own, target_machine):
    """LLVM's dead argument elimination over the functions of `module` not named in `own`,
    which are then renamed after own (the same kernel compiles to the same names) and linked
    linkonce_odr."""
    from llvmlite import binding as ll
    linked = set()
    for f in module.functions:
        if not f.is_declaration and f.name not in own and f.linkage != ll.Linkage.internal:
            f.linkage = ll.Linkage.internal
            linked.add(f.name)
    if not linked:
        return
    passes = ll.create_new_module_pass_manager()
    passes.add_dead_arg_elimination_pass()
    passes.run(module, ll.create_pass_builder(target_machine, ll.create_pipeline_tuning_options(speed_level=0)))
    suffix = "." + hashlib.sha1("\n".join(sorted(own)).encode()).hexdigest()[:16]
    for f in module.functions:       # by name: the pass replaced each function it changed
        if f.name in linked:
            f.name = f.name + suffix
            f.linkage = ll.Linkage.linkonce_odr


_kernel_classes = {}


def _kernel_class(base, python):
    """A subclass of numba's dispatcher `base`: for an entry kernel (python=True), one that
    refuses a signature returning an array; for a kernel-only one, one that refuses calls from
    Python. Either compiles or loads from the cache with LLVM's lock calling nobody back
    (_llvm_lock_without_callbacks)."""
    if (base, python) not in _kernel_classes:
        if python:
            def add_overload(self, cres, *args, **kwargs):   # every compilation and cache load
                if _holds_array(cres.signature.return_type):
                    raise TypeError(
                        f"kernel {self.py_func.__qualname__} returns an array "
                        f"({cres.signature.return_type}) to Python: kernels compile without "
                        "reference counting, so it must write into an array its caller passes")
                return base.add_overload(self, cres, *args, **kwargs)
            def _numba_type_(self):     # how kernels that call this one see it
                from numba.core import types
                return types.Dispatcher(self.in_kernels)
            methods = {"add_overload": add_overload, "_numba_type_": property(_numba_type_)}
        else:
            def __call__(self, *args, **kwargs):
                raise TypeError(f"{self.py_func.__qualname__} is called from numba kernels only "
                                "(it has no Python entry point)")
            methods = {"__call__": __call__}
        def compile(self, sig):
            with _llvm_lock_without_callbacks():
                return base.compile(self, sig)
        methods["compile"] = compile
        name = ("Kernel" if python else "KernelOnly") + base.__name__
        _kernel_classes[base, python] = type(name, (base,), dict(methods, __module__=__name__))
    return _kernel_classes[base, python]


def _holds_array(t) -> bool:
    from numba.core import types
    if isinstance(t, types.Array):
        return True
    return isinstance(t, types.BaseTuple) and any(_holds_array(e) for e in t.types)


def _plain_call_template(dispatcher, args, kws):
    from numba.core import types
    from numba.core.dispatcher import Dispatcher
    return Dispatcher.get_call_template(dispatcher, tuple(types.unliteral(a) for a in args),
                                        {k: types.unliteral(v) for k, v in kws.items()})


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


# -- compiling visibly, before anything keeps time ------------------------------------------
class CompileReport:
    """What the user hears while kernels compile. numba compiles a kernel on its first call
    (minutes for the step kernel on a small machine) unless the cache holds it, so a program
    that warms up says so at the first compilation it sees, and says nothing when everything
    loads from the cache. Subclasses show it: the CLI a line and a progress bar, sim_node its
    log; this base class logs to the "mbsim_ros" logger (the Python API).

    State the hooks read: kernels and ready (the warm-up's kernels and how many are ready),
    kernel (the one being prepared), function (the numba function compiling now), functions
    (compiled so far), cpu (CPU seconds since the first compilation)."""

    def __init__(self):
        self.kernels = 0
        self.ready = 0
        self.kernel = ""
        self.function = ""
        self.functions = 0
        self._cpu0 = None

    @property
    def compiling(self) -> bool:
        """Whether anything compiled since this report began."""
        return self._cpu0 is not None

    @property
    def cpu(self) -> float:
        return 0.0 if self._cpu0 is None else time.process_time() - self._cpu0

    # hooks
    def started(self):
        """The first compilation: say at once that kernels are being compiled."""
        logging.getLogger("mbsim_ros").info(
            "compiling numba kernels (first run of this installation only; cached in %s)", cache_root())

    def progress(self):
        """A function began compiling, or a warm-up kernel is ready."""

    def finished(self):
        """The report ends (called only if something compiled)."""
        logging.getLogger("mbsim_ros").info("compiled %d numba functions in %.0f CPU s", self.functions, self.cpu)

    # driven by the numba listener and warm_up
    def _compiled_one(self, name):
        if self._cpu0 is None:
            self._cpu0 = time.process_time()
            self.started()
        self.functions += 1
        self.function = name
        self.progress()


_report = None      # the CompileReport of the innermost compile_report() block


@contextlib.contextmanager
def compile_report(report=None):
    """Within the block, every numba compilation (the kernels' first calls) is told to `report`
    (a CompileReport; default: one that logs), and warm_up() counts its kernels there."""
    from numba.core import event
    global _report
    report = report or CompileReport()

    class Listener(event.Listener):
        def on_start(self, ev):
            f = ev.data["dispatcher"].py_func
            report._compiled_one(f.__qualname__)

        def on_end(self, ev):
            pass

    previous, _report = _report, report
    try:
        with event.install_listener("numba:compile", Listener()):
            yield report
    finally:
        _report = previous
        if report.compiling:
            report.finished()


_warming = False    # a warm_up() is running: one inside it (a job's own) is part of that job


def warm_up(jobs):
    """Run jobs, [(name, call)]: each the first call of a kernel, which compiles it or loads it
    from the cache, so that nothing compiles later inside a loop that keeps time. Reported to
    the compile_report() in effect, else to a logging one of its own."""
    global _warming
    if _report is None:
        with compile_report():
            return warm_up(jobs)
    if _warming:
        for _, call in jobs:
            call()
        return
    report = _report
    report.kernels += len(jobs)
    _warming = True
    try:
        for name, call in jobs:
            report.kernel = name
            if report.compiling:
                report.progress()
            call()
            report.ready += 1
            if report.compiling:
                report.progress()
    finally:
        _warming = False
