"""SDFormat <sensor> -> Model sensors, in the Model's (OpenHRP) sensor frames.

  imu                               an accelerometer `<name>_accel` and a gyro `<name>_gyro` at the
                                    sensor's frame (`merge_imu` publishes them as one Imu)
  force_torque (in a joint)         a force sensor on the joint's child link: the wrench the child
                                    side exerts on the parent side (child_to_parent), in the sensor
                                    frame (<frame>sensor) or the child link's axes (<frame>child)
  camera, depth_camera, rgbd_camera a camera (COLOR, DEPTH, COLOR_DEPTH): SDFormat looks along +x
                                    with z up, the Model along -z with y up; horizontal_fov becomes
                                    the Model's field of view of the shorter image side
  ray, gpu_ray, lidar, gpu_lidar    a range sensor whose laser frame (x forward, z up) is the SDF
                                    sensor frame; <horizontal> and <vertical> samples, min and max
                                    angles; <range> min and max
Noise blocks (<noise type="gaussian">: mean, stddev, bias_mean, bias_stddev, dynamic_bias_stddev,
dynamic_bias_correlation_time, precision) become the sensor's default noise, per channel; a run's
sensor configuration replaces them. update_rate is the sampling rate (0: every step). Other sensor
types (altimeter, magnetometer, navsat, contact, air_pressure, logical_camera, thermal, ...) are not
simulated: they are listed in the loader's note.
"""
from __future__ import annotations

import math

import numpy as np

from ...model import Sensor
from ...model.model import LASER_FRAME
from ...model.transforms import inverse_transform
from .document import child, children, local

NOISE_FIELDS = ("mean", "stddev", "bias_mean", "bias_stddev", "dynamic_bias_stddev",
                "dynamic_bias_correlation_time", "precision")
RANGE_TYPES = ("ray", "gpu_ray", "lidar", "gpu_lidar")
CAMERA_TYPES = {"camera": "COLOR", "depth_camera": "DEPTH", "depth": "DEPTH", "rgbd_camera": "COLOR_DEPTH",
                "rgbd": "COLOR_DEPTH"}
# the Model's camera frame (looks along -z, y up) in SDFormat's (looks along +x, z up): columns
# are the Model frame's x, y, z written in the SDFormat frame
_CAMERA = np.eye(4)
_CAMERA[:3, :3] = np.array([[0, 0, -1], [-1, 0, 0], [0, 1, 0]], dtype=float)


def read_sensor(reader, scope, el, link_name, X_link_sensor, name_of):
    """[Sensor] of a link's <sensor> (X_link_sensor: its frame in the link frame); name_of(local)
    gives the world name. [] for a type that is not simulated (noted)."""
    stype = (el.get("type") or "").strip()
    name = (el.get("name") or "").strip()
    if not name:
        raise reader.error(el, "missing attribute name=\"...\"")
    if not stype:
        raise reader.error(el, "missing attribute type=\"...\"")
    rate = reader.number(el, "update_rate", 0.0, nonnegative=True)
    params = {"sdf_type": stype}
    if rate > 0:
        params["updateRate"] = rate
    if stype == "imu":
        imu = child(el, "imu")
        acc = dict(params, noise=_axes_noise(reader, imu, "linear_acceleration"))
        gyr = dict(params, noise=_axes_noise(reader, imu, "angular_velocity"))
        return [Sensor(name_of(name + "_accel"), "accelerometer", link_name, X_link_sensor, params=acc),
                Sensor(name_of(name + "_gyro"), "gyro", link_name, X_link_sensor, params=gyr)]
    if stype in CAMERA_TYPES:
        cams = children(el, "camera")
        if not cams:                       # SDFormat's defaults: 320 x 240, horizontal_fov 1.047
            from lxml import etree
            cams = [etree.SubElement(etree.Element("sensor"), "camera")]
        if len(cams) > 1:
            reader.note(el, f"{len(cams)} cameras in one sensor: the first is simulated")
        return [_camera(reader, cams[0], name_of(name), link_name, X_link_sensor, CAMERA_TYPES[stype],
                        dict(params, frameRate=rate or 30.0))]
    if stype in RANGE_TYPES:
        return [_range(reader, el, name_of(name), link_name, X_link_sensor, dict(params, scanRate=rate or 10.0))]
    if stype == "force_torque":
        reader.note(el, "a force_torque sensor in a link (not a joint) has no joint to measure: not simulated")
        return []
    key = f"<sensor type=\"{stype}\">"
    reader.ignored[key] = reader.ignored.get(key, 0) + 1
    return []


def read_joint_sensor(reader, el, joint, name_of):
    """[Sensor] of a <joint>'s <sensor>: force_torque on the joint's child link."""
    stype = (el.get("type") or "").strip()
    name = (el.get("name") or "").strip()
    if not name:
        raise reader.error(el, "missing attribute name=\"...\"")
    if stype != "force_torque":
        reader.note(el, f"a {stype or 'typeless'} sensor in a joint is not simulated")
        return []
    X_joint_sensor = reader.pose(child(el, "pose"))
    ft = child(el, "force_torque")
    frame = (reader.text(ft, "frame") or "child").strip() if ft is not None else "child"
    direction = (reader.text(ft, "measure_direction") or "child_to_parent").strip() if ft is not None else \
        "child_to_parent"
    pose = joint.child_pose @ X_joint_sensor             # the sensor frame in the child link
    if frame == "child":
        pose = pose.copy()
        pose[:3, :3] = np.eye(3)
    elif frame == "parent":
        reader.note(child(ft, "frame"), "<frame>parent</frame>: measured in the sensor frame instead")
    elif frame != "sensor":
        raise reader.error(child(ft, "frame"), f"\"{frame}\": expected child, parent or sensor")
    if direction == "parent_to_child":
        reader.note(child(ft, "measure_direction"), "parent_to_child: the wrench is published child_to_parent")
    elif direction != "child_to_parent":
        raise reader.error(child(ft, "measure_direction"), f"\"{direction}\": expected child_to_parent or "
                                                           "parent_to_child")
    params = {"sdf_type": stype}
    rate = reader.number(el, "update_rate", 0.0, nonnegative=True)
    if rate > 0:
        params["updateRate"] = rate
    noise = []
    for part in ("force", "torque"):
        block = child(ft, part) if ft is not None else None
        noise += _axes_noise(reader, block, None) if block is not None else [None] * 3
    if any(noise):
        params["noise"] = noise
    return [Sensor(name_of(name), "force", joint.child, pose, params=params)]


def _camera(reader, cam, name, link_name, X, mode, params):
    image = child(cam, "image")
    width = reader.integer(image, "width", 320, low=1) if image is not None else 320
    height = reader.integer(image, "height", 240, low=1) if image is not None else 240
    hfov = reader.number(cam, "horizontal_fov", 1.047)
    if not 0 < hfov < math.pi:
        raise reader.error(child(cam, "horizontal_fov"), f"{hfov:g}: expected an angle between 0 and pi")
    f = (width / 2.0) / math.tan(hfov / 2.0)
    fov = 2.0 * math.atan((min(width, height) / 2.0) / f)       # of the shorter side, as the Model says
    clip = child(cam, "clip")
    near = reader.number(clip, "near", 0.1, positive=True) if clip is not None else 0.1
    far = reader.number(clip, "far", 100.0, positive=True) if clip is not None else 100.0
    if child(cam, "depth_camera") is not None:
        dclip = child(child(cam, "depth_camera"), "clip")
        if dclip is not None:
            near = reader.number(dclip, "near", near, positive=True)
            far = reader.number(dclip, "far", far, positive=True)
    params.update(width=width, height=height, fieldOfView=fov, frontClipDistance=near, backClipDistance=far,
                  type=mode)
    noise = _noise(reader, child(cam, "noise"))
    if noise:
        params["noise"] = {"color": noise} if mode != "DEPTH" else {"depth": noise}
    if child(cam, "lens") is not None or child(cam, "distortion") is not None:
        reader.note(cam, "lens and distortion: the image is rendered as a pinhole camera")
    return Sensor(name, "camera", link_name, X @ _CAMERA, params=params)


def _range(reader, el, name, link_name, X, params):
    ray = child(el, "lidar") if child(el, "lidar") is not None else child(el, "ray")
    if ray is None:
        raise reader.error(el, "missing <lidar> (or <ray>)")
    scan = child(ray, "scan")
    if scan is None:
        raise reader.error(ray, "missing <scan>")
    for axis in ("horizontal", "vertical"):
        block = child(scan, axis)
        if block is None:
            continue
        samples = reader.integer(block, "samples", 640 if axis == "horizontal" else 1, low=1)
        lo, hi = reader.number(block, "min_angle", 0.0), reader.number(block, "max_angle", 0.0)
        if lo > hi:
            raise reader.error(block, f"min_angle {lo:g} > max_angle {hi:g}")
        resolution = reader.number(block, "resolution", 1.0, positive=True)
        if resolution != 1.0:
            reader.note(child(block, "resolution"), "a resolution other than 1: the samples are used as given")
        params[axis] = (samples, lo, hi)
    if "horizontal" not in params:
        raise reader.error(scan, "missing <horizontal>")
    rng = child(ray, "range")
    if rng is None:
        raise reader.error(ray, "missing <range>")
    params["minDistance"] = reader.number(rng, "min", 0.0, nonnegative=True)
    params["maxDistance"] = reader.number(rng, "max", positive=True)
    if params["minDistance"] >= params["maxDistance"]:
        raise reader.error(rng, f"min {params['minDistance']:g} >= max {params['maxDistance']:g}")
    noise = _noise(reader, child(ray, "noise"))
    if noise:
        params["noise"] = noise
    return Sensor(name, "range", link_name, X @ inverse_transform(LASER_FRAME), params=params)


def _axes_noise(reader, parent, tag):
    """Per-axis noise dicts of <tag><x><noise/></x>...; [None] * 3 when none is given."""
    block = child(parent, tag) if parent is not None and tag else parent
    out = []
    for axis in "xyz":
        a = child(block, axis) if block is not None else None
        out.append(_noise(reader, child(a, "noise")) if a is not None else None)
    return out if any(out) else None


def _noise(reader, el):
    """A noise dict of a <noise> element (None: none or type none)."""
    if el is None:
        return None
    kind = (el.get("type") or reader.text(el, "type") or "none").strip().lower()
    if kind == "none":
        return None
    if kind not in ("gaussian", "gaussian_quantized"):
        raise reader.error(el, f"noise type \"{kind}\": expected none, gaussian or gaussian_quantized")
    out = {}
    for key in NOISE_FIELDS:
        if child(el, key) is not None:
            out[key] = reader.number(el, key, nonnegative=key not in ("mean", "bias_mean"))
    return out or None


__all__ = ["read_sensor", "read_joint_sensor", "local"]
