"""The package's layering (docs/architecture.md), read from the source: every import statement of
every module, those inside functions included, parsed with ast. A module may import its own
package and the layers below it, never a layer above nor a sibling layer (formats and dynamics,
sensors and hil, ros and view); no two modules import each other, directly or round a cycle."""
import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "mbsim_ros"

# lowest first; one level may hold several packages that must not import each other
LAYERS = [
    ["_kernel_memo"],
    ["_kernel_lowering", "_kernel_inlining", "_kernel_ir"],
    ["_kernel_cache"],
    ["model"],
    ["formats", "dynamics"],
    ["render"],
    ["sensors", "hil"],
    [""],                           # the package's own __init__: the public API over the layers below
    ["run"],
    ["ros", "view"],
    ["batch"],
    ["warmup"],
    ["cli"],
]
LEVEL = {name: k for k, names in enumerate(LAYERS) for name in names}
# what a layer must never import, wherever it sits (architecture.md: run/ knows no ROS)
FORBIDDEN = {
    "run": ("rclpy", "cyclonedds", "rosbags", "mcap", "viser", "websockets", "foxglove"),
    "model": ("numba",),
}


def modules():
    """{dotted module name: path} of every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = modules()


def imports(module, path):
    """[(imported module of ours or outside name, line)] of every import in the module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    base = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                head = base[:len(base) - (node.level - 1)] if node.level > 1 else list(base)
                target = ".".join(head + ([node.module] if node.module else []))
            else:
                target = node.module
            subs = [f"{target}.{alias.name}" for alias in node.names]
            # `from . import x` / `from .pkg import mod`: the modules x, mod (not the package
            # itself when only its modules are named)
            found += [(sub, node.lineno) for sub in subs if sub in MODULES]
            if not all(sub in MODULES for sub in subs):
                found.append((target, node.lineno))
    return found


def ours(name):
    """The longest module of ours that `name` is or lies in (None: outside the package)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in MODULES:
            return candidate
        parts.pop()
    return None


def layer(module):
    """The layer name of one of our modules: its first part below mbsim_ros ("" for the root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def graph():
    """{module: {(imported module of ours, line)}} and {module: {(outside name, line)}}."""
    inner, outer = {}, {}
    for module, path in MODULES.items():
        for name, line in imports(module, path):
            target = ours(name)
            if target is not None and target != module:
                inner.setdefault(module, set()).add((target, line))
            elif target is None:
                outer.setdefault(module, set()).add((name, line))
    return inner, outer


def test_every_package_has_a_layer():
    assert {layer(m) for m in MODULES} - set(LEVEL) == set(), "a new package: give it a layer in LAYERS"


def test_no_upward_or_sideways_import():
    inner, _ = graph()
    bad = []
    for module, targets in sorted(inner.items()):
        a = layer(module)
        for target, line in sorted(targets):
            b = layer(target)
            if a != b and not LEVEL[b] < LEVEL[a]:
                bad.append(f"{module}:{line} ({a}) imports "
                           f"{target} ({b}), {'a sibling' if LEVEL[a] == LEVEL[b] else 'a layer above'}")
    assert not bad, "\n".join(bad)


def test_forbidden_libraries():
    _, outer = graph()
    bad = []
    for module, names in sorted(outer.items()):
        for name, line in sorted(names):
            if name.split(".")[0] in FORBIDDEN.get(layer(module), ()):
                bad.append(f"{module}:{line} imports {name}")
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    inner, _ = graph()
    edges = {m: sorted({t for t, _ in targets}) for m, targets in inner.items()}
    # a package's __init__ importing its own submodules is how a package is built, not a cycle
    # when the submodule imports a sibling through it; count only edges between modules that
    # are not a package and its own member
    def member(a, b):
        return b.startswith(a + ".") or a.startswith(b + ".")
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in edges.get(m, ()):
            if member(m, t):
                continue
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2
    for m in sorted(MODULES):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("broken, expected", [
    ("from ..ros import bridge\n", "a layer above"),
    ("from ..view import app\n", "a layer above"),
])
def test_the_check_sees_an_upward_import_inside_a_function(tmp_path, monkeypatch, broken, expected):
    """The check itself: a run/ module importing ros/ or view/ in a function body fails it."""
    path = PACKAGE / "run" / "session.py"
    text = path.read_text(encoding="utf-8") + "\n\ndef _probe():\n    " + broken
    fake = tmp_path / "session.py"
    fake.write_text(text, encoding="utf-8")
    monkeypatch.setitem(MODULES, "mbsim_ros.run.session", fake)
    monkeypatch.setitem(MODULES, "mbsim_ros.view.app", fake)
    monkeypatch.setitem(LEVEL, "view", LEVEL["ros"])
    with pytest.raises(AssertionError, match=expected):
        test_no_upward_or_sideways_import()


def test_no_private_name_is_imported_across_modules():
    """A name starting with _ is its module's own: no module imports one from another (a helper
    that several modules share is public in its own module)."""
    bad = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("mbsim_ros")):
                for alias in node.names:      # (another library's private names are its business)
                    name = alias.name
                    if name.startswith("_") and not name.startswith("__"):
                        bad.append(f"{module}:{node.lineno} imports {name} from {node.module}")
    assert not bad, "\n".join(bad)
