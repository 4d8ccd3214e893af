"""Headless CPU rendering (color + depth) and ray casting for the camera and range sensors.

    from mbsim_ros.render import world_scene, render, cast_rays, sensor_pose, camera_parameters
    scene = world_scene(models)                    # or Scene(models, compiled.link_names)
    scene.set_link_poses(link_R, link_p)           # every frame, from the dynamics' Data
    color, depth = render(scene, T_cam, 320, 240, fov, near, far)
    cast_rays(scene, origins, directions, max_distance, out)

(measurements and the choice of a numba rasterizer: filled in below)
"""
from .._kernel_cache import kernel_cache
from .image import depth_to_image, write_png
from .scene import (Scene, camera_parameters, framing_view, lathe, look_at, range_directions,
                    sensor_pose, tessellate, world_scene)

with kernel_cache("render"):   # our kernels call only our own: cached under this subpackage's digest
    from .raster import AMBIENT, BACKGROUND, LIGHT, intrinsics, render, shade
    from .raycast import cast_rays

__all__ = ["AMBIENT", "BACKGROUND", "LIGHT", "Scene", "camera_parameters", "cast_rays",
           "depth_to_image", "framing_view", "intrinsics", "lathe", "look_at", "range_directions", "render",
           "sensor_pose", "shade", "tessellate", "world_scene", "write_png"]
