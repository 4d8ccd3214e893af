"""3D lidar (issue 38): a range sensor with rings inside a closed box room. Every ray's range
equals the analytic distance to the room's walls (the ray caster is exact: 1e-9 m); the
PointCloud2 read back by rosbags and decoded here by the fields' own offsets puts every point on
a wall (to float32's precision on a few metres: 2e-6 m), each point's ring is its row and its
pitch, its intensity the laser_retro of the wall it lies on."""
import math

import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros.model import LoopConstraint  # noqa: F401  (the model API a user builds with)
from mbsim_ros.model import Joint, Link, Model, Sensor, Shape
from mbsim_ros.model.model import LASER_FRAME
from mbsim_ros.model.transforms import inverse_transform, make_transform, rpy_to_matrix

HALF = np.array([2.0, 1.5, 1.25])      # the room's inner half sizes (m)
WALL = 0.1                             # wall thickness
RETRO = {0: 100.0, 1: 50.0, 2: 200.0}  # laser_retro of the walls normal to x, y, z
X_LASER = make_transform(rpy_to_matrix([0.05, -0.1, 0.3]), [0.3, -0.2, 0.1])    # the laser frame in the world
H = (90, -3.1, 3.1)                    # samples, min, max (rad)
V = (16, -0.4, 0.35)


def room_with_lidar():
    walls = []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            size = 2 * HALF + 2 * WALL
            size[axis] = WALL
            p = np.zeros(3)
            p[axis] = sign * (HALF[axis] + WALL / 2)
            walls.append(Shape("box", pose=make_transform(p=p), size=size, laser_retro=RETRO[axis]))
    m = Model("room")
    m.add_link(Link("walls", mass=1.0, inertia=np.eye(3), collisions=walls, visuals=walls))
    m.add_joint(Joint("walls_weld", "fixed", None, "walls"))
    m.add_link(Link("head", mass=1.0, inertia=np.eye(3)))
    m.add_joint(Joint("head_weld", "fixed", None, "head", origin=X_LASER))
    # the Model's range sensor frame is OpenHRP's (front -Z); LASER_FRAME turns it into the laser frame
    m.sensors.append(Sensor("lidar", "range", "head", pose=inverse_transform(LASER_FRAME),
                            params={"horizontal": H, "vertical": V, "minDistance": 0.05, "maxDistance": 30.0,
                                    "scanRate": 10.0}))
    return m.finalize()


def analytic_ranges(directions_laser):
    """Distance from the laser origin to the room's inner walls along each laser-frame ray."""
    o = X_LASER[:3, 3]
    d = directions_laser.reshape(-1, 3).astype(float) @ X_LASER[:3, :3].T
    with np.errstate(divide="ignore"):
        t = np.where(d > 0, (HALF - o) / d, np.where(d < 0, (-HALF - o) / d, np.inf))
    return t.min(axis=1), t.argmin(axis=1)


@pytest.fixture(scope="module")
def sample():
    sim = mb.Simulation(room_with_lidar(), dt=0.01)
    sim.step(10)
    return sim.devices["lidar"], sim.readings()["lidar"]


def test_every_range_is_the_distance_to_the_walls(sample):
    dev, r = sample
    assert (dev.rings, dev.columns) == (16, 90) and r.values.shape == (16 * 90,)
    th, ph = np.meshgrid(np.linspace(*H[1:], H[0]), np.linspace(*V[1:], V[0]))
    exact = np.stack([np.cos(ph) * np.cos(th), np.cos(ph) * np.sin(th), np.sin(ph)], axis=-1)
    np.testing.assert_allclose(dev.laser_directions, exact, atol=1e-7)       # float32 rays
    t, axis = analytic_ranges(exact)
    np.testing.assert_allclose(r.values, t, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(r.intensities, np.array([RETRO[a] for a in axis], np.float32))
    assert r.frame == "lidar_laser_frame"


def _decode(cdr):
    """A PointCloud2 deserialized by rosbags, its points decoded here from the fields' offsets."""
    from rosbags.typesys import Stores, get_typestore
    msg = get_typestore(Stores.ROS2_JAZZY).deserialize_cdr(cdr, "sensor_msgs/msg/PointCloud2")
    types = {7: "<f4", 4: "<u2"}        # PointField FLOAT32, UINT16
    fields = {f.name: (f.offset, types[f.datatype]) for f in msg.fields}
    raw = np.asarray(msg.data, np.uint8).reshape(msg.height, msg.width, msg.point_step)
    out = {}
    for name, (offset, dtype) in fields.items():
        size = np.dtype(dtype).itemsize
        out[name] = np.ascontiguousarray(raw[..., offset:offset + size]).view(dtype)[..., 0]
    return msg, out


def test_point_cloud_read_back_puts_every_point_on_a_wall(sample):
    from mbsim_ros.ros import messages
    dev, r = sample
    msg, f = _decode(messages.lidar_cloud(r.stamp, r.frame, r.values, dev.laser_directions, r.intensities))
    assert (msg.height, msg.width, msg.is_dense, msg.is_bigendian) == (16, 90, False, False)
    assert [x.name for x in msg.fields] == ["x", "y", "z", "intensity", "ring"]
    assert msg.header.frame_id == "lidar_laser_frame" and msg.row_step == msg.point_step * 90
    p = np.stack([f["x"], f["y"], f["z"]], axis=-1).astype(float)          # laser frame
    world = p @ X_LASER[:3, :3].T + X_LASER[:3, 3]
    on_wall = np.abs(np.abs(world) - HALF).min(axis=-1)
    assert np.isfinite(p).all() and on_wall.max() < 2e-6
    inside = (np.abs(world) <= HALF + 2e-6).all(axis=-1)
    assert inside.all()
    wall_axis = np.abs(np.abs(world) - HALF).argmin(axis=-1)
    np.testing.assert_array_equal(f["intensity"], np.vectorize(RETRO.get)(wall_axis).astype(np.float32))
    np.testing.assert_array_equal(f["ring"], np.repeat(np.arange(16), 90).reshape(16, 90))
    pitch = np.arcsin(p[..., 2] / np.linalg.norm(p, axis=-1))
    np.testing.assert_allclose(pitch, np.repeat(np.linspace(*V[1:], V[0]), 90).reshape(16, 90), atol=1e-5)


def test_no_return_and_too_close_are_nan_points_per_rep_117():
    from mbsim_ros.ros import messages
    dirs = np.array([[[1, 0, 0], [0, 1, 0], [0, 0, 1]]], np.float32)
    ranges = np.array([np.inf, -np.inf, 2.0])
    _, f = _decode(messages.lidar_cloud(1.5, "laser", ranges, dirs, np.array([5.0, 6.0, 7.0])))
    assert np.isnan(f["x"][0, :2]).all() and np.isnan(f["z"][0, :2]).all()
    assert (f["x"][0, 2], f["y"][0, 2], f["z"][0, 2]) == (0, 0, 2)
    assert f["intensity"].tolist() == [[0, 0, 7]]


def test_laser_scan_carries_the_ring_nearest_the_horizon(sample):
    dev, r = sample
    assert dev.scan_ring == int(np.argmin(np.abs(np.linspace(*V[1:], V[0]))))
    assert dev.angle_min == pytest.approx(-3.1) and dev.angle_max == pytest.approx(3.1)
    assert dev.angle_increment == pytest.approx(6.2 / 89)


def test_openhrp_pitch_range_gives_symmetric_rings():
    m = room_with_lidar()
    m.sensors[0].params = {"scanAngle": math.pi, "scanStep": 0.1, "pitchRange": 0.4, "pitchStep": 0.1,
                           "maxDistance": 30.0}
    sim = mb.Simulation(m, dt=0.01)
    dev = sim.devices["lidar"]
    np.testing.assert_allclose(dev.pitches, [-0.2, -0.1, 0, 0.1, 0.2], atol=1e-12)
    assert dev.columns == 2 * int(math.pi / 2 / 0.1) + 1 and dev.scan_ring == 2
