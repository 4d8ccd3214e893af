"""The simulation_interfaces types in our rosbags typestore (messages.py, from the definitions in
mbsim_ros/data/interfaces) against the rosidl package built from the same files
(test/ros_interfaces): the same RIHS01 type hashes a real rclpy endpoint advertises, and the same
CDR as rclpy's serializer (read back by it), so bags and the DDS transport carry what ROS 2 nodes send."""
import numpy as np
import pytest
from conftest import ROS_MISSING

from mbsim_ros.ros import messages as m

if ROS_MISSING:
    pytest.skip(ROS_MISSING, allow_module_level=True)
pytest.importorskip("simulation_interfaces", reason="simulation_interfaces not built (test/ros_interfaces)")
import rclpy  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from simulation_interfaces import msg as M  # noqa: E402
from simulation_interfaces import srv as S  # noqa: E402
from simulation_interfaces.action import SimulateSteps  # noqa: E402
from test_type_hash import _hash_string, _wait  # noqa: E402

T = m.TYPESTORE.types
MESSAGES = sorted(k for k in T if k.startswith("simulation_interfaces/msg/"))


def test_every_definition_is_registered():
    from pathlib import Path
    root = Path(m.__file__).resolve().parents[1] / "data" / "interfaces" / "simulation_interfaces"
    assert [k.rsplit("/", 1)[1] for k in MESSAGES] == sorted(p.stem for p in (root / "msg").glob("*.msg"))
    for p in (root / "srv").glob("*.srv"):
        assert f"simulation_interfaces/srv/{p.stem}_Request" in T and f"simulation_interfaces/srv/{p.stem}_Response" in T
    for part in ("Goal", "Result", "Feedback", "SendGoal_Request", "SendGoal_Response", "GetResult_Request",
                 "GetResult_Response", "FeedbackMessage"):
        assert f"simulation_interfaces/action/SimulateSteps_{part}" in T


def test_type_hashes_match_real_rclpy_endpoints():
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("mbsim_si_hash_probe", context=context)
    try:
        types = [(t, getattr(M, t.rsplit("/", 1)[1])) for t in MESSAGES]
        types.append(("simulation_interfaces/action/SimulateSteps_FeedbackMessage", SimulateSteps.Impl.FeedbackMessage))
        for k, (typename, cls) in enumerate(types):
            topic = f"/mbsim_si_hash/t{k}"
            node.create_publisher(cls, topic, 10)
            real = _hash_string(_wait(typename, lambda: node.get_publishers_info_by_topic(topic))[0].topic_type_hash)
            assert m.TYPESTORE.hash_rihs01(typename) == real, typename
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)


def _ours(typename, **fields):
    return bytes(m.TYPESTORE.serialize_cdr(T[typename](**fields), typename))


def _state(rosidl, t, p, q, v, w, a, al):
    """An EntityState in both libraries (frame "world")."""
    from geometry_msgs.msg import Accel, Point, Pose, Quaternion, Twist, Vector3
    from std_msgs.msg import Header
    from builtin_interfaces.msg import Time
    sec, nanosec = m.to_sec_nanosec(t)
    vec = (lambda x: Vector3(x=x[0], y=x[1], z=x[2])) if rosidl else (lambda x: T["geometry_msgs/msg/Vector3"](x=x[0], y=x[1], z=x[2]))
    if rosidl:
        return M.EntityState(header=Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id="world"),
                             pose=Pose(position=Point(x=p[0], y=p[1], z=p[2]), orientation=Quaternion(x=q[0], y=q[1], z=q[2], w=q[3])),
                             twist=Twist(linear=vec(v), angular=vec(w)), acceleration=Accel(linear=vec(a), angular=vec(al)))
    return T["simulation_interfaces/msg/EntityState"](
        header=m.header(t, "world"),
        pose=T["geometry_msgs/msg/Pose"](position=T["geometry_msgs/msg/Point"](x=p[0], y=p[1], z=p[2]),
                                         orientation=T["geometry_msgs/msg/Quaternion"](x=q[0], y=q[1], z=q[2], w=q[3])),
        twist=T["geometry_msgs/msg/Twist"](linear=vec(v), angular=vec(w)),
        acceleration=T["geometry_msgs/msg/Accel"](linear=vec(a), angular=vec(al)))


def _same_wire(rosidl_msg, ours: bytes):
    """rclpy reads our bytes back as the message it serializes, in as many bytes (Fast CDR leaves
    its alignment padding uninitialized, so the bytes themselves can differ there)."""
    theirs = serialize_message(rosidl_msg)
    assert len(theirs) == len(ours)
    assert deserialize_message(ours, type(rosidl_msg)) == rosidl_msg


def test_cdr_matches_rclpys_serializer():
    args = (1.25, (1.0, 2.0, 3.0), (0.0, 0.0, 0.6, 0.8), (0.1, -0.2, 0.3), (0.0, 0.0, 1.5), (0.0, 0.0, -9.8), (1.0, 2.0, 3.0))
    _same_wire(_state(True, *args), bytes(m.TYPESTORE.serialize_cdr(_state(False, *args),
                                                                    "simulation_interfaces/msg/EntityState")))
    # a response with sequences of nested types and strings
    res = S.GetEntitiesStates.Response(result=M.Result(result=M.Result.RESULT_OK, error_message="ok"),
                                       entities=["arm", "box"], states=[_state(True, *args), _state(True, *args)])
    _same_wire(res, _ours("simulation_interfaces/srv/GetEntitiesStates_Response",
                          result=T["simulation_interfaces/msg/Result"](result=1, error_message="ok"),
                          entities=["arm", "box"], states=[_state(False, *args), _state(False, *args)]))
    features = M.SimulatorFeatures(features=[0, 1, 10, 33], spawn_formats=["urdf", "vrml"], custom_info="x")
    _same_wire(features, _ours("simulation_interfaces/msg/SimulatorFeatures",
                               features=np.array([0, 1, 10, 33], dtype=np.uint16), spawn_formats=["urdf", "vrml"],
                               custom_info="x"))
    fb = SimulateSteps.Impl.FeedbackMessage()
    fb.goal_id.uuid = np.arange(16, dtype=np.uint8)
    fb.feedback.completed_steps, fb.feedback.remaining_steps = 7, 2**40
    _same_wire(fb, _ours("simulation_interfaces/action/SimulateSteps_FeedbackMessage",
                         goal_id=T["unique_identifier_msgs/msg/UUID"](uuid=np.arange(16, dtype=np.uint8)),
                         feedback=T["simulation_interfaces/action/SimulateSteps_Feedback"](
                             completed_steps=7, remaining_steps=2**40)))
