"""Headless CPU rendering (color + depth) and ray casting for the camera and range sensors.

    from mbsim_ros.render import Scene, world_scene, render, cast_rays, sensor_pose
    scene = Scene(models, compiled.link_names)     # or world_scene(models): at the initial pose
    scene.set_link_poses(data.link_R, data.link_p) # each frame, from the dynamics' Data
    color, depth = render(scene, T_cam, 320, 240, fov, near, far, color, depth, mono=False)
    cast_rays(scene, origins, directions, max_distance, out)
    write_png("view.png", color); write_png("depth.png", depth_to_image(depth))

scene.py holds the geometry (triangles for the rasterizer, analytic primitives for the ray
caster and for infinite planes), raster.py the z-buffer rasterizer and the camera model
(intrinsics(), the one place of the pixel formula), raycast.py the exact ray caster, image.py
the PNG (and JPEG) writer. All kernels are numba, single-threaded, with no allocation per call: a Scene
owns its workspaces, so one Scene serves one render or cast at a time.

Why a numba rasterizer rather than OpenGL through a headless context, measured on the bundled
world (SR1 + floor: 49 boxes and cylinders, 3204 triangles at 24 segments) on the 2-core
machine this was written on, best of 9 batches after warm-up (bench/sensors.py):
    LeftCamera COLOR_DEPTH 320x240 (its own size)    0.25 - 0.28 ms per frame
    the same view at 640x480                          0.84 - 1.17 ms
    whole robot in view (mbsim render's default), 320x240   0.36 - 0.37 ms
    ChestRange scan, 683 rays (cast_rays)             52 - 95 us
  (up to about 2x more when the machine is loaded by other jobs). For comparison, MuJoCo's
  OpenGL renderer through EGL on the same machine (Mesa llvmpipe: software GL, there is no
  GPU), SR1.urdf on a floor box, the whole robot in view, color then depth read back:
  9.3 ms per 320x240 frame with its default effects, 8.6 ms with shadows, reflections, skybox
  and haze off; 13-14 ms at 640x480.
  So: (1) the numba rasterizer is about 25x faster than software GL here, far inside the 10 ms
  limit and the 1.5 ms aim (two 30 Hz cameras: 2 x 30 x 0.26 ms = 16 ms of rendering per
  simulated second, 16 us per 1 ms physics step on average, below the ~80 us step); (2) GL
  needs system libraries (libEGL/Mesa or a GPU driver) that CI and many robots' computers do
  not have, and a Python binding (PyOpenGL, moderngl) that would be a new dependency; (3) the
  depth must be exact for planar faces and +inf beyond the clip range (REP 118), which GL's
  usual 24-bit non-linear z-buffer does not give without a linearizing pass; here each face's own
  plane equation gives 1/depth per pixel in float64. A GPU would win on scenes of millions of
  triangles; robot models of boxes, cylinders and modest meshes are not that.
First use compiles the kernels (about 2.5 s for render, 2 s for cast_rays, once per source
version: cached on disk under kernel_cache("render"), 10 ms to load afterwards).

Limitations: flat (per-face) shading, no textures, shadows or anti-aliasing; curved primitives
are drawn as their tessellation (inscribed, `segments` around: 24 puts a cylinder's drawn side
within 0.9 % of its radius) while cast_rays is exact on them; analytic solids are one-sided
(seen from outside), mesh triangles two-sided.
"""
from .._kernel_cache import kernel_cache
from .image import depth_to_image, write_image, write_png
from .scene import (Scene, camera_parameters, framing_view, lathe, lidar_directions, look_at, range_directions,
                    sensor_pose, tessellate, world_scene)

with kernel_cache("render"):   # our kernels call only our own: cached under this subpackage's digest
    from .raster import AMBIENT, BACKGROUND, LIGHT, intrinsics, render, shade
    from .raycast import cast_rays

__all__ = ["AMBIENT", "BACKGROUND", "LIGHT", "Scene", "camera_parameters", "cast_rays",
           "depth_to_image", "framing_view", "intrinsics", "lathe", "lidar_directions", "look_at", "range_directions", "render",
           "sensor_pose", "shade", "tessellate", "world_scene", "write_image", "write_png"]
