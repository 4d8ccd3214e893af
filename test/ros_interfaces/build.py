"""Build the ROS 2 interface packages the PyPI ROS wheels lack, from our own definitions.

Every folder beside this file that holds msg/, srv/ or action/ files is one interface package,
named by the folder (`tf2_msgs/msg/TFMessage.msg`). We write the definitions ourselves (an
interface's fields are facts); package.xml and CMakeLists.txt are generated here: dependencies
come from the field types (`geometry_msgs/TransformStamped` -> geometry_msgs; services add
service_msgs, actions action_msgs, builtin_interfaces and unique_identifier_msgs), so adding a
package is adding its folder of .msg/.srv/.action files, nothing else. Packages may depend on
each other (built in dependency order) and on installed ones (the ros-jazzy-* wheels).

They are built with the rosidl generator and ament_cmake wheels (ros-jazzy-rosidl-default-
generators, ros-jazzy-ament-cmake), cmake and a C/C++ compiler, into a prefix named by a hash of
the definitions, this script and the Python version:

    ~/.cache/mbsim_ros/ros_interfaces/<hash>      ($MBSIM_ROS_INTERFACES_CACHE instead of
                                                   ~/.cache/mbsim_ros/ros_interfaces)

so reruns (and later CI runs on the same machine) skip the build. Concurrent builds of the same
hash wait for each other (a lock file); a prefix counts only once its `.complete` marker is written
(a killed build is redone).

Usage:
    python test/ros_interfaces/build.py          # build if needed; prints the prefix
    eval "$(python test/ros_interfaces/build.py --env)"   # build if needed; export the paths
    from build import ensure, environment        # (test/conftest.py) prefix, {name: value}

The environment a process needs to use them: PYTHONPATH (the generated Python packages),
LD_LIBRARY_PATH (their C libraries, which rosidl's type support loads by searching it) and
AMENT_PREFIX_PATH (the ament index: ros2 tools and rclpy find packages there). The libraries
carry an RPATH to the prefix's lib/, so a process whose LD_LIBRARY_PATH was set after it started
(pytest after conftest) still imports them.

The generator wheels' cmake export files name the Python they were built with
(/opt/python/cp311-cp311/include/python3.11 and its numpy): the generated CMakeLists points every
imported `*__rosidl_generator_py` target at this Python's include directories instead.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
KINDS = ("msg", "srv", "action")
PRIMITIVES = {"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16",
              "int32", "uint32", "int64", "uint64", "string", "wstring"}


class BuildError(RuntimeError):
    """A package failed to configure or build; the message names it and holds cmake's output tail."""


def cache_root() -> Path:
    root = os.environ.get("MBSIM_ROS_INTERFACES_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "mbsim_ros" / "ros_interfaces"


def packages(source: Path = HERE) -> dict[str, list[Path]]:
    """{package name: its interface files}, for every folder of `source` with msg/srv/action files."""
    out = {}
    for folder in sorted(p for p in source.iterdir() if p.is_dir()):
        files = sorted(f for kind in KINDS for f in (folder / kind).glob(f"*.{kind}"))
        if files:
            out[folder.name] = files
    return out


def dependencies(name: str, files: list[Path]) -> list[str]:
    """The packages `name`'s interfaces use: from field types, plus what services and actions need."""
    deps = set()
    for f in files:
        for lineno, line in enumerate(f.read_text(encoding="utf8").splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line or line == "---":
                continue
            words = line.split()
            if len(words) < 2:
                raise BuildError(f"{f}:{lineno}: expected '<type> <name> [default]' or "
                                 f"'<type> <NAME>=<value>', got {line!r}")
            base = re.sub(r"(\[[^\]]*\]|<=\d+)+$", "", words[0])     # int32[3], string<=8[], T[<=4]
            base = re.sub(r"<=\d+$", "", base)
            if base in PRIMITIVES:
                continue
            if base == "Header":                      # the one implicit package: std_msgs/Header
                deps.add("std_msgs")
            elif "/" in base:
                deps.add(base.split("/")[0])
        kind = f.parent.name
        if kind in ("srv", "action"):
            deps.add("service_msgs")
        if kind == "action":
            deps.update(("action_msgs", "builtin_interfaces", "unique_identifier_msgs"))
    deps.discard(name)
    return sorted(deps)


def build_order(pkgs: dict[str, list[Path]]) -> list[tuple[str, list[str]]]:
    """[(package, its dependencies)] with every local dependency before the package using it."""
    deps = {name: dependencies(name, files) for name, files in pkgs.items()}
    order, state = [], {}

    def visit(name, chain):
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise BuildError("interface packages depend on each other in a circle: "
                             + " -> ".join(chain + [name]))
        state[name] = "visiting"
        for d in deps[name]:
            if d in deps:
                visit(d, chain + [name])
        state[name] = "done"
        order.append((name, deps[name]))

    for name in deps:
        visit(name, [])
    return order


def digest(pkgs: dict[str, list[Path]], source: Path = HERE) -> str:
    """Hash of what the build depends on: the definitions, this script, the Python ABI."""
    h = hashlib.sha256()
    h.update(Path(__file__).read_bytes())
    h.update(sysconfig.get_config_var("SOABI").encode() or sys.version.encode())
    for files in pkgs.values():
        for f in files:
            h.update(str(f.relative_to(source)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def installed_prefix() -> Path:
    """Where the ROS wheels put share/ and lib/ (the virtual environment's prefix)."""
    import rosidl_generator_py
    site = Path(rosidl_generator_py.__file__).resolve().parents[1]
    for prefix in (Path(sys.prefix), *site.parents):
        if (prefix / "share" / "rosidl_default_generators").is_dir():
            return prefix
    raise BuildError("the rosidl generator wheels are installed but share/rosidl_default_generators "
                     "is not under any prefix of " + str(site))


PACKAGE_XML = """<?xml version="1.0"?>
<package format="3">
  <name>{name}</name>
  <version>0.0.0</version>
  <description>{name} interfaces, built for mbsim_ros tests (test/ros_interfaces)</description>
  <maintainer email="dev@mbsim-ros.local">mbsim_ros developers</maintainer>
  <license>MIT</license>
  <buildtool_depend>ament_cmake</buildtool_depend>
  <buildtool_depend>rosidl_default_generators</buildtool_depend>
{depends}  <exec_depend>rosidl_default_runtime</exec_depend>
  <member_of_group>rosidl_interface_packages</member_of_group>
  <export>
    <build_type>ament_cmake</build_type>
  </export>
</package>
"""

CMAKELISTS = """cmake_minimum_required(VERSION 3.8)
project({name})
find_package(ament_cmake REQUIRED)
find_package(rosidl_default_generators REQUIRED)
{find_deps}
rosidl_generate_interfaces(${{PROJECT_NAME}}
  {files}
  {dependencies})
# The wheels' exported generator_py targets name the include directories of the Python they were
# built with; use this one's (checked at generate time, so fixing them here is in time).
get_property(_imported DIRECTORY PROPERTY IMPORTED_TARGETS)
foreach(_target ${{_imported}})
  if(_target MATCHES "__rosidl_generator_py$")
    set_target_properties(${{_target}} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "{python_includes}")
  endif()
endforeach()
ament_export_dependencies(rosidl_default_runtime)
ament_package()
"""


def write_package(name: str, files: list[Path], deps: list[str], src: Path, source: Path = HERE):
    """package.xml, CMakeLists.txt and copies of the interface files in `src`."""
    for f in files:
        target = src / f.relative_to(source / name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, target)
    import numpy
    python_include = sysconfig.get_paths()["include"]
    if not (Path(python_include) / "Python.h").exists():
        raise BuildError(f"{python_include}/Python.h is missing: the generated Python bindings "
                         "need this Python's headers (e.g. apt-get install python3-dev)")
    includes = ";".join([python_include, numpy.get_include()])
    (src / "package.xml").write_text(PACKAGE_XML.format(
        name=name, depends="".join(f"  <depend>{d}</depend>\n" for d in deps)), encoding="utf8")
    (src / "CMakeLists.txt").write_text(CMAKELISTS.format(
        name=name, find_deps="".join(f"find_package({d} REQUIRED)\n" for d in deps),
        files="\n  ".join(str(f.relative_to(source / name)) for f in files),
        dependencies=("DEPENDENCIES " + " ".join(deps)) if deps else "",
        python_includes=includes), encoding="utf8")


def _run(cmd, cwd, env, what):
    if shutil.which(cmd[0]) is None:
        raise BuildError(f"{cmd[0]} is not installed (needed for {what}; e.g. apt-get install cmake g++)")
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-40:])
        raise BuildError(f"{what} failed (exit {proc.returncode}): {shlex.join(cmd)}\n{tail}")


def environment(prefix: Path, base: dict | None = None) -> dict:
    """The variables (from `base`, default os.environ) with the prefix's paths put first."""
    base = os.environ if base is None else base
    site = prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    out = {}
    for key, path in (("PYTHONPATH", site), ("LD_LIBRARY_PATH", prefix / "lib"),
                      ("AMENT_PREFIX_PATH", prefix)):
        parts = [p for p in base.get(key, "").split(os.pathsep) if p and p != str(path)]
        out[key] = os.pathsep.join([str(path)] + parts)
    return out


def build(prefix: Path, source: Path = HERE, log=print) -> None:
    """Configure, build and install every package of `source` into `prefix` (in order)."""
    pkgs = packages(source)
    ros = installed_prefix()
    jobs = str(max(1, min(4, os.cpu_count() or 1)))
    env = dict(os.environ)
    env.update(environment(prefix, env))
    env["AMENT_PREFIX_PATH"] = os.pathsep.join([str(prefix), str(ros)] + [
        p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    with tempfile.TemporaryDirectory(prefix="mbsim_ros_interfaces_") as tmp:
        for name, deps in build_order(pkgs):
            log(f"building ROS interface package {name} (depends on {', '.join(deps) or 'nothing'})")
            src, bld = Path(tmp) / "src" / name, Path(tmp) / "build" / name
            src.mkdir(parents=True)
            bld.mkdir(parents=True)
            write_package(name, pkgs[name], deps, src, source)
            _run(["cmake", "-S", str(src), "-B", str(bld), "-DCMAKE_BUILD_TYPE=Release",
                  f"-DCMAKE_INSTALL_PREFIX={prefix}",
                  f"-DCMAKE_PREFIX_PATH={prefix};{ros}",
                  f"-DCMAKE_INSTALL_RPATH={prefix / 'lib'}",
                  f"-DPython3_EXECUTABLE={sys.executable}",
                  "-DBUILD_TESTING=OFF"], bld, env, f"configuring {name}")
            _run(["cmake", "--build", str(bld), "-j", jobs], bld, env, f"building {name}")
            _run(["cmake", "--install", str(bld)], bld, env, f"installing {name}")


def ensure(source: Path = HERE, log=print) -> Path:
    """The prefix holding every package of `source`, built first if it is not in the cache."""
    pkgs = packages(source)
    root = cache_root()
    prefix = root / digest(pkgs, source)
    if (prefix / ".complete").exists():
        return prefix
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{prefix.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)             # another process may be building it
        if (prefix / ".complete").exists():
            return prefix
        # cmake installs into the final path (generated files name it), so build there and mark
        # it complete at the end; a half-built prefix from a killed build is removed first
        shutil.rmtree(prefix, ignore_errors=True)
        build(prefix, source, log)
        (prefix / ".complete").write_text(" ".join(pkgs) + "\n")
    return prefix


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", action="store_true",
                        help="print `export` lines for PYTHONPATH, LD_LIBRARY_PATH, AMENT_PREFIX_PATH")
    args = parser.parse_args(argv)
    try:
        prefix = ensure(log=lambda text: print(text, file=sys.stderr))
    except (BuildError, ImportError) as e:
        print(f"test/ros_interfaces/build.py: {e}", file=sys.stderr)
        return 2
    if args.env:
        for key, value in environment(prefix).items():
            print(f"export {key}={shlex.quote(value)}")
    else:
        print(prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main())
