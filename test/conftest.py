"""Shared test fixtures: where the real model files live and where our own small models live;
the ROS 2 environment (real rclpy from the PyPI wheels, our interface packages) for this process
and for every process a test starts (`subprocess_env`)."""
import os
import threading
import time
import socket
import pathlib
import random
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent


def _ros_interfaces():
    """Build (or take from the cache) the interface packages of test/ros_interfaces and put them
    on this process's paths. Returns why not where the ROS wheels are absent, else None."""
    try:
        import rosidl_generator_py  # noqa: F401  (the generator wheels, test extra on CPython 3.11 x86_64)
    except ImportError:
        return "the ROS 2 Jazzy wheels (test extra, CPython 3.11 on x86_64 only) are not installed"
    from ros_interfaces.build import BuildError, ensure, environment
    try:
        prefix = ensure(log=lambda text: print(f"conftest: {text}", file=sys.stderr))
    except BuildError as e:   # (.ci/run builds them first and stops there on failure)
        return f"the ROS interface packages of test/ros_interfaces did not build: {str(e).splitlines()[0]}"
    env = environment(prefix)
    os.environ.update(env)
    for path in reversed(env["PYTHONPATH"].split(os.pathsep)):
        if path not in sys.path:
            sys.path.insert(0, path)
    # rosidl's type support dlopens its libraries by name, which searches the LD_LIBRARY_PATH
    # this process started with: load them now (a loaded library is found by its name)
    import ctypes
    for lib in sorted((prefix / "lib").glob("lib*.so")):
        ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
    return None


ROS_MISSING = _ros_interfaces()


def _ros_domain() -> int:
    """One DDS domain for the whole session, on loopback: other test sessions on this machine run
    DDS tests at the same time. 100-199 (the cyclonedds tests pick 201-230; Fast DDS allows up to
    232); under pytest-xdist (-n) each worker of a run gets its own: consecutive from one chosen
    per run."""
    run, worker = os.environ.get("PYTEST_XDIST_TESTRUNUID"), os.environ.get("PYTEST_XDIST_WORKER", "")
    if run and worker.startswith("gw"):
        return 100 + (int(run, 16) + int(worker[2:])) % 100
    return random.SystemRandom().randrange(100, 200)


os.environ["ROS_DOMAIN_ID"] = str(_ros_domain())
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
# The environment as it is now, before any test module imports opensim (which sets
# LD_LIBRARY_PATH to PATH, after which a child process cannot load the ROS libraries).
_ENVIRONMENT = dict(os.environ)


def subprocess_env(**extra) -> dict:
    """The environment for a process a test starts: the one this session began with (plus our
    ROS paths and domain), with `extra` set."""
    env = dict(_ENVIRONMENT)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a test's server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lower_priority():
    """preexec_fn of a CPU-heavy child whose speed no test measures (a cold compile): run beside
    it (pytest -n), tests that pace against the wall clock keep their share of the cores."""
    os.nice(10)


OWN_MODELS = HERE / "models"
SHARED_MODELS = pathlib.Path(os.environ.get(
    "MBSIM_SHARED_MODELS", HERE.parent.parent / "shared" / "models")).resolve()


def shared_model(*parts) -> pathlib.Path:
    """Path to a model in ../shared/models; skips the test (with the reason) where absent."""
    path = SHARED_MODELS.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared model files (../shared/models) are not beside this checkout")
    return path


def shared_models(subdir, pattern):
    """All matching shared model paths, for parametrizing; empty where ../shared is absent."""
    folder = SHARED_MODELS / subdir
    return sorted(folder.glob(pattern)) if folder.is_dir() else []


def example_robot(*parts) -> pathlib.Path:
    """Path to a robot file of the `example-robot-data` wheel (test extra), e.g.
    example_robot("solo_description", "robots", "solo12.urdf"). The wheel installs its robots
    under cmeel.prefix/share/example-robot-data/robots, with no Python module to ask."""
    from importlib import metadata
    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        pytest.fail("example-robot-data is not installed (pip install -e .[test] installs it)")
    path = pathlib.Path(dist.locate_file("cmeel.prefix/share/example-robot-data/robots")).joinpath(*parts)
    assert path.exists(), f"{path}: not in this example-robot-data release"
    return path


# Files that take minutes, slowest first, go to the front: with -n, the other worker works
# through the rest beside them instead of one worker finishing them alone at the end.
SLOW_FILES = ("test_warmup.py", "test_live_browser.py", "test_node_view.py", "test_replay.py",
              "test_compile_once.py", "test_node.py")


def pytest_collection_modifyitems(items):
    rank = {name: k for k, name in enumerate(SLOW_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FILES)))


# Python source for a child process: `compiled` lists the qualified name of every function numba
# compiles in it from here on (numba's compile events).
COUNT_COMPILES = """
from numba.core import event
compiled = []
class Count(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__qualname__)
    def on_end(self, ev):
        pass
event.register("numba:compile", Count())
"""


class PipeText:
    """Everything written to a pipe, read on a thread as it comes (so the pipe never fills; raw
    reads: tqdm ends its updates with \\r, not a newline)."""

    def __init__(self, pipe):
        self.text = ""
        self.thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self.thread.start()

    def _read(self, pipe):
        while True:
            chunk = os.read(pipe.fileno(), 4096)
            if not chunk:
                return
            self.text += chunk.decode(errors="replace")


def fetch_page(url, proc, timeout):
    """The page at `url` once the process `proc` serves it (its server may come up after the
    process starts); AssertionError if proc ends or `timeout` s pass first."""
    import urllib.request
    end = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return r.read().decode()
        except OSError:
            assert time.monotonic() < end and proc.poll() is None, f"{url}: no page (process status {proc.poll()})"
            time.sleep(0.5)
