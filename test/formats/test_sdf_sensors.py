"""SDFormat sensors in the Model's frames (issue 38): a camera and a lidar look along the SDF
sensor's +x (a wall 2.9 m ahead is 2.9 m away in the depth image's centre and in the lidar's
middle ray; turned around they see nothing), the laser frame is the SDF sensor frame, IMU and
lidar noise blocks become the sensors' default noise, a joint's force_torque sensor sits on the
child link at the joint frame."""
import math
import warnings

import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros.model import sensor_ros_frames

WORLD = """<sdf version="1.9"><world name="w">
  <model name="wall"><static>true</static><pose>3 0 1 0 0 0</pose>
    <link name="slab"><visual name="v"><geometry><box><size>0.2 4 4</size></box></geometry></visual></link></model>
  <model name="robot"><pose>0 0 1 0 0 0</pose>
    <link name="base">
      <sensor name="cam" type="depth_camera"><update_rate>50</update_rate><pose>0 0 0 0 0 {yaw}</pose>
        <camera><horizontal_fov>1.0</horizontal_fov><image><width>65</width><height>49</height></image>
          <clip><near>0.05</near><far>20</far></clip></camera></sensor>
      <sensor name="lidar" type="gpu_lidar"><update_rate>50</update_rate><pose>0 0 0 0 0 {yaw}</pose>
        <lidar><scan><horizontal><samples>3</samples><min_angle>-0.1</min_angle><max_angle>0.1</max_angle></horizontal></scan>
          <range><min>0.1</min><max>20</max></range><noise type="gaussian"><mean>0</mean><stddev>0.0</stddev></noise></lidar></sensor>
      <sensor name="imu" type="imu"><imu><linear_acceleration><x><noise type="gaussian"><stddev>0.02</stddev>
        <bias_mean>0.1</bias_mean></noise></x></linear_acceleration></imu></sensor>
      <sensor name="baro" type="altimeter"/>
    </link>
    <link name="arm"><pose>0.2 0 0 0 0 0</pose></link>
    <joint name="fix" type="fixed"><parent>world</parent><child>base</child></joint>
    <joint name="elbow" type="revolute"><pose>0 0 0.1 0 0 0</pose><parent>base</parent><child>arm</child>
      <axis><xyz>0 1 0</xyz></axis>
      <sensor name="ft" type="force_torque"><pose>0 0 0.05 0 0 0</pose><force_torque><frame>sensor</frame></force_torque></sensor>
    </joint>
  </model></world></sdf>"""


def load(tmp_path, yaw):
    p = tmp_path / f"w{yaw}.sdf"
    p.write_text(WORLD.format(yaw=yaw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mb.load_model(p)


@pytest.mark.parametrize("yaw, expected", [(0.0, 2.9), (math.pi, np.inf)])
def test_camera_and_lidar_look_along_the_sdf_sensor_x(tmp_path, yaw, expected):
    model = load(tmp_path, yaw)
    sim = mb.Simulation(model, dt=0.01)
    sim.step(2)
    r = sim.readings()
    depth = r["cam"].values.depth
    assert depth.shape == (49, 65)
    assert depth[24, 32] == pytest.approx(expected, abs=1e-4)
    scan = r["lidar"].values
    assert scan[1] == pytest.approx(expected, abs=1e-9)           # the middle ray, yaw 0
    if np.isfinite(expected):
        np.testing.assert_allclose(scan[[0, 2]], 2.9 / math.cos(0.1), atol=1e-9)


def test_sensor_frames_noise_and_force_torque(tmp_path):
    model = load(tmp_path, 0.0)
    by = {s.name: s for s in model.sensors}
    assert set(by) == {"cam", "lidar", "imu_accel", "imu_gyro", "ft"}      # the altimeter is noted, not simulated
    lidar = by["lidar"]
    (name, T), = sensor_ros_frames(lidar)
    np.testing.assert_allclose(lidar.pose @ T, np.eye(4), atol=1e-12)     # laser frame = SDF sensor frame
    assert lidar.params["horizontal"] == (3, -0.1, 0.1) and lidar.params["maxDistance"] == 20
    cam = by["cam"]
    (oname, To), = sensor_ros_frames(cam)
    optical = cam.pose @ To                  # z forward = SDF x, x right = SDF -y, y down = SDF -z
    np.testing.assert_allclose(optical[:3, :3], [[0, 0, 1], [-1, 0, 0], [0, -1, 0]], atol=1e-12)
    f = 32.5 / math.tan(0.5)
    assert cam.params["fieldOfView"] == pytest.approx(2 * math.atan(24.5 / f))   # of the shorter side
    assert cam.params["type"] == "DEPTH" and cam.params["frameRate"] == 50
    acc = by["imu_accel"]
    assert acc.params["noise"][0] == {"stddev": 0.02, "bias_mean": 0.1} and acc.params["noise"][1] is None
    sim = mb.Simulation(model, dt=0.01)
    assert sim.devices["imu_accel"].variance[0] == pytest.approx(0.02 ** 2)
    ft = by["ft"]
    assert ft.type == "force" and ft.link == "arm"
    np.testing.assert_allclose(ft.pose[:3, 3], [0, 0, 0.15], atol=1e-12)     # joint frame + 0.05, in the arm's frame
