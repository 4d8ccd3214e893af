"""launch/sim.launch.py, launch/rviz.launch.py and config/mbsim.rviz, without ROS.

ROS 2's `launch`, `launch_ros` and `ament_index_python` are not installable with pip, so the launch
files are loaded against small stand-ins with the constructor signatures of the Jazzy (and Humble)
API: keyword-only arguments where the real classes have them, so a misspelt or misplaced argument
fails here as it would under `ros2 launch`. The stand-ins record what the launch files build; the
parameters are evaluated with launch_ros' typed-substitution rules for str, float and bool.
Where the real packages import (a sourced ROS 2), `test_real_launch_api` loads the files with them.

The .rviz file is checked as YAML: every display has Class, Name and Enabled, and its topics are
relative names of the bundled SR1 world's sensors.
"""
import importlib.util
import os
import sys
import types

import pytest
import yaml

from mbsim_ros.formats import load_model
from mbsim_ros.run.world import DEFAULT_WORLD

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM_LAUNCH = os.path.join(REPO, "launch", "sim.launch.py")
RVIZ_LAUNCH = os.path.join(REPO, "launch", "rviz.launch.py")
RVIZ_CONFIG = os.path.join(REPO, "config", "mbsim.rviz")

SIM_ARGS = {"model": "", "config": None, "rviz": "true", "use_sim_time": "true",
            "namespace": "SR1", "rtf": "1.0", "view": "false", "view_port": "8080",
            "foxglove": "false", "foxglove_port": "8765"}   # config: the share path, set per test
RVIZ_ARGS = {"namespace": "SR1", "use_sim_time": "true", "rviz_config": None}


# ---------------------------------------------------------------------------------------------
# stand-ins for launch, launch_ros and ament_index_python

class LaunchConfiguration:
    def __init__(self, variable_name, *, default=None):
        assert isinstance(variable_name, str)
        self.variable_name = variable_name
        self.default = default
        CREATED.append(self)

    def __eq__(self, other):
        return isinstance(other, LaunchConfiguration) and other.variable_name == self.variable_name

    __hash__ = None

    def __repr__(self):
        return f"LaunchConfiguration({self.variable_name!r})"


CREATED = []          # every LaunchConfiguration the launch file made


class LaunchDescription:
    def __init__(self, initial_entities=None, *, deprecated_reason=None):
        self.entities = list(initial_entities or [])


class Action:
    def __init__(self, *, condition=None):
        self.condition = condition


class DeclareLaunchArgument(Action):
    def __init__(self, name, *, default_value=None, description=None, choices=None, **kwargs):
        super().__init__(**kwargs)
        assert isinstance(name, str)
        self.name, self.default_value = name, default_value
        self.description, self.choices = description, choices


class IncludeLaunchDescription(Action):
    def __init__(self, launch_description_source, *, launch_arguments=None, **kwargs):
        super().__init__(**kwargs)
        self.launch_description_source = launch_description_source
        self.launch_arguments = list(launch_arguments or [])


class PythonLaunchDescriptionSource:
    def __init__(self, launch_file_path):
        self.location = launch_file_path


class IfCondition:
    def __init__(self, predicate_expression):
        self.predicate_expression = predicate_expression


_EXECUTE_PROCESS_KWARGS = {"output", "emulate_tty", "respawn", "respawn_delay", "sigterm_timeout",
                           "sigkill_timeout", "additional_env", "cwd", "shell", "log_cmd",
                           "prefix", "on_exit", "name"}


class Node(Action):
    def __init__(self, *, executable, package=None, name=None, namespace=None, exec_name=None,
                 parameters=None, remappings=None, ros_arguments=None, arguments=None, **kwargs):
        unknown = set(kwargs) - _EXECUTE_PROCESS_KWARGS - {"condition"}
        assert not unknown, f"Node() got unexpected keyword arguments {unknown}"
        super().__init__(condition=kwargs.pop("condition", None))
        self.executable, self.package, self.name, self.namespace = executable, package, name, namespace
        self.parameters, self.remappings = parameters, remappings
        self.ros_arguments, self.arguments = ros_arguments, arguments
        self.kwargs = kwargs


class ParameterValue:
    def __init__(self, value, *, value_type=None):
        self.value, self.value_type = value, value_type


def _fake_modules(share_dir):
    """{module name: module} for the stand-ins; get_package_share_directory knows mbsim_ros only."""
    def module(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        return m

    def get_package_share_directory(package_name):
        if package_name != "mbsim_ros":
            raise LookupError(f"package {package_name!r} not found")
        return share_dir

    return {
        "launch": module("launch", LaunchDescription=LaunchDescription),
        "launch.actions": module("launch.actions", DeclareLaunchArgument=DeclareLaunchArgument,
                                 IncludeLaunchDescription=IncludeLaunchDescription),
        "launch.conditions": module("launch.conditions", IfCondition=IfCondition),
        "launch.launch_description_sources": module(
            "launch.launch_description_sources",
            PythonLaunchDescriptionSource=PythonLaunchDescriptionSource),
        "launch.substitutions": module("launch.substitutions", LaunchConfiguration=LaunchConfiguration),
        "launch_ros": module("launch_ros"),
        "launch_ros.actions": module("launch_ros.actions", Node=Node),
        "launch_ros.parameter_descriptions": module("launch_ros.parameter_descriptions",
                                                    ParameterValue=ParameterValue),
        "ament_index_python": module("ament_index_python"),
        "ament_index_python.packages": module(
            "ament_index_python.packages", get_package_share_directory=get_package_share_directory),
    }


def _share(tmp_path):
    """An install-like share/mbsim_ros holding links to this checkout's launch and config files."""
    share = tmp_path / "share" / "mbsim_ros"
    for sub, files in (("launch", (SIM_LAUNCH, RVIZ_LAUNCH)), ("config", (RVIZ_CONFIG,))):
        (share / sub).mkdir(parents=True)
        for f in files:
            os.symlink(f, share / sub / os.path.basename(f))
    return str(share)


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def fake_ros(tmp_path, monkeypatch):
    """Load launch files against the stand-ins; returns (load(path) -> LaunchDescription, share)."""
    share = _share(tmp_path)
    for name, mod in _fake_modules(share).items():
        monkeypatch.setitem(sys.modules, name, mod)
    CREATED.clear()

    def load(path):
        return _load(path, "launch_under_test_" + os.path.basename(path).split(".")[0]) \
            .generate_launch_description()
    return load, share


# ---------------------------------------------------------------------------------------------
# evaluation with launch_ros' rules (ParameterValue -> perform_typed_substitution)

def _value(sub, configs):
    if isinstance(sub, LaunchConfiguration):
        return configs[sub.variable_name]
    if isinstance(sub, str):
        return sub
    if isinstance(sub, (list, tuple)):
        return "".join(_value(s, configs) for s in sub)
    raise TypeError(f"unexpected substitution {sub!r}")


def _typed(text, value_type):
    if value_type is str:
        return text
    if value_type is float:
        return float(yaml.safe_load(text))      # '1' and '1.0' are both valid floats
    if value_type is bool:
        value = yaml.safe_load(text)
        if not isinstance(value, bool):
            raise ValueError(f"{text!r} is not a bool")
        return value
    if value_type is int:
        value = yaml.safe_load(text)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{text!r} is not an integer")
        return value
    raise AssertionError(f"value_type {value_type!r} not expected here")


def _parameters(node, configs):
    out = {}
    for entry in node.parameters:
        assert isinstance(entry, dict), "parameter files are not expected here"
        for key, value in entry.items():
            assert isinstance(value, ParameterValue), \
                f"{key}: a bare substitution is parsed as YAML ('' becomes None); wrap it in ParameterValue"
            out[key] = _typed(_value(value.value, configs), value.value_type)
    return out


def _arguments(ld):
    return {e.name: e for e in ld.entities if isinstance(e, DeclareLaunchArgument)}


def _one(ld, cls):
    found = [e for e in ld.entities if isinstance(e, cls)]
    assert len(found) == 1, f"expected one {cls.__name__}, got {found}"
    return found[0]


# ---------------------------------------------------------------------------------------------
# sim.launch.py

def test_launch_files_compile():
    for path in (SIM_LAUNCH, RVIZ_LAUNCH):
        with open(path, encoding="utf8") as f:
            compile(f.read(), path, "exec")


def test_sim_declares_its_arguments(fake_ros):
    load, share = fake_ros
    ld = load(SIM_LAUNCH)
    args = _arguments(ld)
    expected = dict(SIM_ARGS, config=os.path.join(share, "config", "sim.yaml"))
    assert list(args) == list(expected)
    for name, arg in args.items():
        assert arg.default_value == expected[name], name
        assert arg.description, f"{name} has no description"
    # every launch configuration the file reads is one it declares
    assert {c.variable_name for c in CREATED} <= set(args)


def test_sim_node(fake_ros):
    load, share = fake_ros
    ld = load(SIM_LAUNCH)
    node = _one(ld, Node)
    assert (node.package, node.executable, node.name) == ("mbsim_ros", "sim_node", "mbsim")
    assert node.namespace == LaunchConfiguration("namespace")
    assert node.kwargs.get("output") == "screen"
    assert not node.remappings          # /tf, /tf_static, /clock are absolute: nothing to remap
    assert node.condition is None
    assert not node.arguments and not node.ros_arguments

    keys = [k for entry in node.parameters for k in entry]
    assert sorted(keys) == ["config", "foxglove", "foxglove_port", "model", "real_time_factor", "use_sim_time",
                            "view", "view_port"]
    value_types = {k: getattr(v, "value_type", v) for entry in node.parameters for k, v in entry.items()}
    assert value_types == {"model": str, "config": str, "real_time_factor": float, "use_sim_time": bool,
                           "view": bool, "view_port": int, "foxglove": bool, "foxglove_port": int}

    defaults = dict(SIM_ARGS, config=os.path.join(share, "config", "sim.yaml"))
    params = _parameters(node, defaults)
    assert params == {"model": "", "config": os.path.join(share, "config", "sim.yaml"),
                      "real_time_factor": 1.0, "use_sim_time": True, "view": False, "view_port": 8080,
                      "foxglove": False, "foxglove_port": 8765}
    assert type(params["real_time_factor"]) is float and type(params["model"]) is str

    given = dict(defaults, model="/robots/a.urdf,/robots/b.wrl", config="", rtf="0",
                 use_sim_time="false", namespace="robot", view="true", view_port="8090",
                 foxglove="true", foxglove_port="8770")
    assert _parameters(node, given) == {"model": "/robots/a.urdf,/robots/b.wrl", "config": "",
                                        "real_time_factor": 0.0, "use_sim_time": False,
                                        "view": True, "view_port": 8090,
                                        "foxglove": True, "foxglove_port": 8770}
    # strings that YAML would turn into numbers or booleans stay strings
    assert _parameters(node, dict(given, model="1.5", config="true"))["model"] == "1.5"
    assert _parameters(node, dict(given, model="1.5", config="true"))["config"] == "true"
    with pytest.raises(ValueError):
        _parameters(node, dict(given, rtf="fast"))


def test_sim_includes_rviz_on_condition(fake_ros):
    load, share = fake_ros
    ld = load(SIM_LAUNCH)
    include = _one(ld, IncludeLaunchDescription)
    source = include.launch_description_source
    assert isinstance(source, PythonLaunchDescriptionSource)
    assert source.location == os.path.join(share, "launch", "rviz.launch.py")
    assert os.path.isfile(source.location)
    assert isinstance(include.condition, IfCondition)
    assert include.condition.predicate_expression == LaunchConfiguration("rviz")
    passed = dict(include.launch_arguments)
    assert passed == {"namespace": LaunchConfiguration("namespace"),
                      "use_sim_time": LaunchConfiguration("use_sim_time")}
    # the included file declares what is passed to it
    rviz_args = _arguments(load(source.location))
    assert set(passed) <= set(rviz_args)
    # entity order: arguments first, then the node and RViz
    kinds = [type(e).__name__ for e in ld.entities]
    assert kinds == ["DeclareLaunchArgument"] * len(SIM_ARGS) + ["Node", "IncludeLaunchDescription"]


# ---------------------------------------------------------------------------------------------
# rviz.launch.py

def test_rviz_launch(fake_ros):
    load, share = fake_ros
    ld = load(RVIZ_LAUNCH)
    args = _arguments(ld)
    expected = dict(RVIZ_ARGS, rviz_config=os.path.join(share, "config", "mbsim.rviz"))
    assert list(args) == list(expected)
    for name, arg in args.items():
        assert arg.default_value == expected[name], name
        assert arg.description, f"{name} has no description"
    assert {c.variable_name for c in CREATED} <= set(args)

    node = _one(ld, Node)
    assert (node.package, node.executable) == ("rviz2", "rviz2")
    assert node.namespace == LaunchConfiguration("namespace")
    assert node.arguments == ["-d", LaunchConfiguration("rviz_config")]
    assert os.path.isfile(_value(node.arguments[1], expected))
    assert node.kwargs.get("output") == "screen"
    assert not node.remappings
    assert _parameters(node, expected) == {"use_sim_time": True}
    assert _parameters(node, dict(expected, use_sim_time="False")) == {"use_sim_time": False}


# ---------------------------------------------------------------------------------------------
# the real launch API, where a sourced ROS 2 provides it

def test_real_launch_api(tmp_path, monkeypatch):
    # launch_ros first: this checkout's launch/ directory imports as a namespace package `launch`
    pytest.importorskip("launch_ros", reason="ROS 2 `launch_ros` is not importable (no sourced ROS 2); "
                        "the stand-in tests above cover the launch files")
    launch = pytest.importorskip("launch", reason="ROS 2 `launch` is not importable")
    assert hasattr(launch, "LaunchDescription"), f"`launch` is not ROS 2's launch: {launch.__path__}"
    packages = pytest.importorskip("ament_index_python.packages",
                                   reason="ament_index_python is not importable")
    from launch.actions import IncludeLaunchDescription as RealInclude
    from launch.utilities import perform_substitutions
    from launch_ros.actions import Node as RealNode

    share = _share(tmp_path)
    monkeypatch.setattr(packages, "get_package_share_directory",
                        lambda name: share if name == "mbsim_ros" else pytest.fail(name))
    context = launch.LaunchContext()

    ld = _load(SIM_LAUNCH, "real_sim_launch").generate_launch_description()
    # get_launch_arguments() also loads the included rviz.launch.py through its source
    args = {a.name: perform_substitutions(context, a.default_value) for a in ld.get_launch_arguments()}
    assert args == dict(SIM_ARGS, config=os.path.join(share, "config", "sim.yaml"),
                        rviz_config=os.path.join(share, "config", "mbsim.rviz"))
    assert sum(isinstance(e, RealNode) for e in ld.entities) == 1
    include = [e for e in ld.entities if isinstance(e, RealInclude)]
    assert len(include) == 1
    context.launch_configurations.update({"rviz": "true"})
    assert include[0].condition.evaluate(context) is True
    context.launch_configurations.update({"rviz": "false"})
    assert include[0].condition.evaluate(context) is False

    ld = _load(RVIZ_LAUNCH, "real_rviz_launch").generate_launch_description()
    assert [a.name for a in ld.get_launch_arguments()] == list(RVIZ_ARGS)
    assert sum(isinstance(e, RealNode) for e in ld.entities) == 1


# ---------------------------------------------------------------------------------------------
# config/mbsim.rviz

@pytest.fixture(scope="module")
def rviz():
    with open(RVIZ_CONFIG, encoding="utf8") as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def sensors():
    """{sensor name: type} of the bundled world (the default namespace's model)."""
    models = [load_model(p) for p in DEFAULT_WORLD]
    assert models[0].name == SIM_ARGS["namespace"]   # the default namespace is the model's name
    return {s.name: s.type for m in models for s in m.sensors}


def _displays(rviz):
    return rviz["Visualization Manager"]["Displays"]


def _topic(display):
    topic = display["Topic"]
    assert set(topic) >= {"Value", "Depth", "Durability Policy", "History Policy", "Reliability Policy"}
    return topic["Value"]


def test_rviz_structure(rviz):
    assert {"Panels", "Visualization Manager", "Window Geometry"} <= set(rviz)
    assert {p["Class"] for p in rviz["Panels"]} >= {"rviz_common/Displays", "rviz_common/Views"}
    vm = rviz["Visualization Manager"]
    assert vm["Global Options"]["Fixed Frame"] == "world"
    assert vm["Views"]["Current"]["Class"] == "rviz_default_plugins/Orbit"
    assert vm["Transformation"]["Current"]["Class"] == "rviz_default_plugins/TF"
    names = []
    for d in _displays(rviz):
        assert {"Class", "Name", "Enabled"} <= set(d), d
        assert d["Class"].startswith(("rviz_default_plugins/", "rviz_imu_plugin/")), d["Class"]
        assert d["Enabled"] is True
        names.append(d["Name"])
    assert len(names) == len(set(names)), "display names must be unique (image panels are keyed by name)"
    for d in _displays(rviz):
        if d["Class"] == "rviz_default_plugins/Image":
            assert d["Name"] in rviz["Window Geometry"]


def test_rviz_displays_and_topics(rviz, sensors):
    by_class = {}
    for d in _displays(rviz):
        by_class.setdefault(d["Class"], []).append(d)
    assert len(by_class["rviz_default_plugins/Grid"]) == 1

    model, = by_class["rviz_default_plugins/RobotModel"]
    assert model["Description Source"] == "Topic"
    assert model["Description Topic"] == {"Depth": 5, "Durability Policy": "Transient Local",
                                          "History Policy": "Keep Last",
                                          "Reliability Policy": "Reliable",
                                          "Value": "robot_description"}
    assert model["TF Prefix"] == ""

    tf, = by_class["rviz_default_plugins/TF"]
    assert tf["Show Names"] is False and tf["Show Axes"] is True and tf["Marker Scale"] <= 0.5

    topics = {cls: sorted(_topic(d) for d in ds) for cls, ds in by_class.items() if cls.endswith(
        ("/Image", "/LaserScan", "/Wrench", "/Imu"))}
    assert topics == {
        "rviz_default_plugins/Image": ["LeftCamera/depth/image_raw", "LeftCamera/image_raw",
                                       "RightCamera/image_raw"],
        "rviz_default_plugins/LaserScan": ["ChestRange"],
        "rviz_default_plugins/Wrench": ["LeftAnkleForceSensor", "RightAnkleForceSensor"],
        "rviz_imu_plugin/Imu": ["WaistAccelSensor"],
    }
    # relative names (the namespace applies), naming the bundled world's sensors of the right kind
    every = [t for ts in topics.values() for t in ts]
    assert not [t for t in every if t.startswith("/")]
    cameras = {n for n, kind in sensors.items() if kind == "camera"}
    assert {t.split("/")[0] for t in topics["rviz_default_plugins/Image"]} <= cameras
    assert set(topics["rviz_default_plugins/LaserScan"]) == {n for n, k in sensors.items() if k == "range"}
    assert set(topics["rviz_default_plugins/Wrench"]) == {n for n, k in sensors.items() if k == "force"}
    assert set(topics["rviz_imu_plugin/Imu"]) == {n for n, k in sensors.items() if k == "accelerometer"}

    # the node's sensor topics are reliable; a Reliable reader matches them
    for ds in by_class.values():
        for d in ds:
            if "Topic" in d:
                assert d["Topic"]["Reliability Policy"] == "Reliable", d["Name"]
                assert d["Topic"]["Durability Policy"] == "Volatile", d["Name"]

    imu, = by_class["rviz_imu_plugin/Imu"]
    # the accelerometer's Imu has no orientation estimate: the arrow is drawn raw in the sensor's
    # TF frame (no derotation by the message's placeholder quaternion, no fixed-frame orientation)
    assert imu["Acceleration properties"]["Enable acceleration"] is True
    assert imu["Acceleration properties"]["Derotate acceleration"] is False
    assert imu["fixed_frame_orientation"] is False
    assert imu["Axes properties"]["Enable axes"] is False
    assert imu["Box properties"]["Enable box"] is False
