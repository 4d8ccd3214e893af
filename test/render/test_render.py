"""The renderer (color + depth), the ray caster, PNG output and `mbsim render`.

Tolerances:
  DEPTH_RTOL = 1e-5: depth of planar surfaces. The rasterizer evaluates each face's own plane
      equation per pixel in float64 (1/d is linear in the pixel coordinates), then stores float32
      (relative rounding 6e-8). Any interpolation error (e.g. affine instead of perspective-correct)
      or a wrong pixel ray would be of the order of a pixel over f, 1e-3, so 1e-5 separates them.
  RAY_TOL = 1e-9 m: ray casts against analytic shapes are closed forms in float64 on numbers of
      order 10: rounding stays near 1e-14.
"""
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbsim_ros import cli
from mbsim_ros.model import Joint, Link, Model, Shape
from mbsim_ros.render import (AMBIENT, BACKGROUND, LIGHT, Scene, cast_rays, depth_to_image,
                              intrinsics, look_at, range_directions, render, sensor_pose, shade,
                              tessellate, world_scene, write_png)

DEPTH_RTOL = 1e-5
RAY_TOL = 1e-9
W, H, FOV = 160, 120, 0.9


# ------------------------------------------------------------------------- helpers ---
def pose(p=(0.0, 0.0, 0.0), rotvec=(0.0, 0.0, 0.0)):
    T = np.eye(4)
    T[:3, :3] = Rotation.from_rotvec(rotvec).as_matrix()
    T[:3, 3] = p
    return T


def scene_of(*shapes, segments=24, G=None):
    """Each shape on its own link welded to the world; G (4x4) moves the whole world."""
    m = Model("w")
    for i, s in enumerate(shapes):
        m.add_link(Link(f"b{i}", visuals=[s]))
        m.add_joint(Joint(f"j{i}", "fixed", None, f"b{i}", origin=np.eye(4) if G is None else G))
    return world_scene(m.finalize(), segments=segments)


def rays(W, H, fov):
    """The camera-frame ray of every pixel: ((u - cx) / f, -(v - cy) / f, -1), shape (H, W, 3)."""
    f, _, cx, cy = intrinsics(W, H, fov)
    u, v = np.meshgrid(np.arange(W), np.arange(H))
    return np.stack([(u - cx) / f, -(v - cy) / f, -np.ones_like(u, float)], axis=-1)


def random_rigid(seed):
    rng = np.random.default_rng(seed)
    return pose(rng.uniform(-3, 3, 3), Rotation.random(random_state=seed).as_rotvec())


def unit(v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


# ------------------------------------------------------------------- camera model ---
def test_intrinsics_use_the_shorter_side():
    for w, h in ((640, 480), (240, 320), (100, 100)):
        fx, fy, cx, cy = intrinsics(w, h, 0.7)
        assert fx == fy == pytest.approx((min(w, h) / 2) / np.tan(0.35), rel=1e-15)
        assert (cx, cy) == ((w - 1) / 2, (h - 1) / 2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_small_sphere_appears_at_its_projected_pixel(seed):
    """A world point P seen from a camera at a random pose lands at u = cx + f x / d,
    v = cy - f y / d (row 0 at the top) with (x, y, -d) = P in the camera frame."""
    G = random_rigid(seed)                       # camera and world moved together
    rng = np.random.default_rng(10 + seed)
    Pc = np.array([rng.uniform(-0.8, 0.8), rng.uniform(-0.6, 0.6), -3.0])   # camera frame, off axis
    r = 0.1
    scene = scene_of(Shape("sphere", pose=pose(Pc), radius=r, color=[1, 0, 0, 1]), segments=64, G=G)
    T_cam = G
    f, _, cx, cy = intrinsics(W, H, FOV)
    color, depth = render(scene, T_cam, W, H, FOV, 0.01, 10.0)
    mask = np.isfinite(depth)
    assert mask.sum() > 30                        # a disk of radius f r / d ~ 4 px
    assert np.all(np.any(color[mask] != BACKGROUND, axis=-1))
    assert np.all(color[~mask] == BACKGROUND)
    v, u = np.nonzero(mask)
    assert abs(u.mean() - (cx + f * Pc[0] / 3.0)) < 0.3     # pixel-sampled disk's centroid
    assert abs(v.mean() - (cy - f * Pc[1] / 3.0)) < 0.3
    # the sphere's nearest point is about r nearer than its centre along the axis
    assert depth[mask].min() == pytest.approx(3.0 - r, abs=2e-3)


# --------------------------------------------------------------------------- depth ---
@pytest.mark.parametrize("d", [0.05, 1.0, 3.7, 42.0])
@pytest.mark.parametrize("kind", ["plane", "box"])
def test_a_surface_facing_the_camera_reads_its_distance_at_every_pixel(d, kind):
    """An analytic plane, or the front face of a big box (two triangles), at distance d
    perpendicular to the optical axis: depth is d at every pixel, also at the corners whose
    Euclidean distance is d |r| > d (depth is along the optical axis, REP 118)."""
    G = random_rigid(3)
    if kind == "plane":
        shape = Shape("plane", pose=pose((0, 0, -d)))               # normal +z: toward the camera
    else:
        shape = Shape("box", pose=pose((0, 0, -d - 0.5)), size=[100 * d, 100 * d, 1.0])
    scene = scene_of(shape, G=G)
    _, depth = render(scene, G, W, H, FOV, 0.01, 100.0)
    assert depth.dtype == np.float32 and depth.shape == (H, W)
    assert np.allclose(depth, d, rtol=DEPTH_RTOL, atol=0)
    corner_euclid = d * np.linalg.norm(rays(W, H, FOV)[0, 0])
    assert corner_euclid > d * 1.1 and abs(depth[0, 0] - d) < DEPTH_RTOL * d


@pytest.mark.parametrize("kind", ["plane", "box"])
def test_a_tilted_surface_has_perspective_correct_depth(kind):
    """A surface n . X = k tilted 70 degrees: depth at pixel ray r is k / (n . r) exactly, up to
    `far` (the horizon crosses the image). Interpolating depth affinely in screen space instead
    would be off by centimetres."""
    far = 50.0
    n = unit([0.0, np.sin(1.22), np.cos(1.22)])          # camera frame, facing the camera
    P0 = np.array([0.0, 0.0, -2.0])
    R = Rotation.align_vectors([n], [[0.0, 0.0, 1.0]])[0].as_matrix()
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, P0
    if kind == "plane":
        shape = Shape("plane", pose=T)
    else:
        shape = Shape("box", pose=T @ pose((0, 0, -0.5)), size=[400.0, 400.0, 1.0])   # reaches past far
    G = random_rigid(4)
    scene = scene_of(shape, G=G)
    _, depth = render(scene, G, W, H, FOV, 0.01, far)
    r = rays(W, H, FOV)
    with np.errstate(divide="ignore"):
        expected = (n @ P0) / (r @ n)
    expected[(expected <= 0.01) | (expected > far)] = np.inf
    seen = np.isfinite(expected)
    assert 0.3 < seen.mean() < 1.0                    # the horizon crosses the image
    assert np.array_equal(np.isfinite(depth), seen)
    assert np.allclose(depth[seen], expected[seen], rtol=DEPTH_RTOL, atol=0)


@pytest.mark.parametrize("kind", ["plane", "box"])
def test_a_floor_reaching_behind_the_camera_is_clipped_not_wrapped(kind):
    """A camera 1 m above a 200 m floor, looking level: the floor's triangles have corners
    behind the camera. Below the horizon depth = h f / (v - cy) (finite up to `far`), above it
    +inf: a triangle projected without near clipping wraps around into the sky."""
    h, far = 1.0, 30.0
    floor = (Shape("plane", color=[0.5, 0.5, 0.5, 1]) if kind == "plane" else
             Shape("box", pose=pose((0, 0, -0.05)), size=[200.0, 200.0, 0.1], color=[0.5, 0.5, 0.5, 1]))
    scene = scene_of(floor)
    for yaw in (0.0, 0.6, 2.5):
        T_cam = look_at([0.3, -0.2, h], [0.3 + np.cos(yaw), -0.2 + np.sin(yaw), h])
        color, depth = render(scene, T_cam, W, H, FOV, 0.01, far)
        f, _, cx, cy = intrinsics(W, H, FOV)
        v = np.arange(H)[:, None] * np.ones((1, W))
        with np.errstate(divide="ignore"):
            expected = np.where(v > cy, h * f / (v - cy), np.inf)
        expected[expected > far] = np.inf
        assert np.array_equal(np.isfinite(depth), np.isfinite(expected))
        seen = np.isfinite(expected)
        assert seen[-1].all() and not seen[0].any()
        assert np.allclose(depth[seen], expected[seen], rtol=DEPTH_RTOL, atol=0)
        assert np.all(color[~seen] == BACKGROUND)


def test_near_and_far_clip_and_nothing_is_infinite():
    scene = scene_of(Shape("box", pose=pose((0, 0, -2.0)), size=[0.5, 0.5, 0.5]))
    _, depth = render(scene, np.eye(4), W, H, FOV, 0.01, 1.5)       # the box is beyond far
    assert np.all(np.isinf(depth))
    _, depth = render(scene, np.eye(4), W, H, FOV, 0.01, 10.0)
    assert depth[H // 2, W // 2] == pytest.approx(1.75, rel=DEPTH_RTOL)
    _, depth = render(scene, np.eye(4), W, H, FOV, 1.9, 10.0)      # near plane cuts the box
    # inside the cut: the box is a solid seen from outside, so its back face is not drawn
    assert np.isinf(depth[H // 2, W // 2])
    assert np.all(np.isinf(render(scene_of(), np.eye(4), W, H, FOV, 0.01, 10.0)[1]))


def test_render_agrees_with_cast_rays_on_boxes():
    """The rasterizer and the ray caster are two implementations of the same pixel rays: on a
    scene of boxes (planar faces) their depths agree pixel by pixel (ray distance / |r|)."""
    rng = np.random.default_rng(5)
    boxes = [Shape("box", pose=pose(rng.uniform([-2, -1.5, -6], [2, 1.5, -2]), rng.uniform(-1, 1, 3)),
                   size=rng.uniform(0.3, 1.2, 3)) for _ in range(12)]
    G = random_rigid(6)
    scene = scene_of(*boxes, G=G)
    _, depth = render(scene, G, W, H, FOV, 0.01, 100.0)
    r = rays(W, H, FOV).reshape(-1, 3)
    dirs = (r / np.linalg.norm(r, axis=1, keepdims=True)) @ G[:3, :3].T
    out = cast_rays(scene, np.tile(G[:3, 3], (len(r), 1)), dirs, 100.0)
    expected = (out / np.linalg.norm(r, axis=1)).reshape(H, W)
    assert 0.2 < np.isfinite(expected).mean() < 0.9
    agree = (np.isfinite(depth) == np.isfinite(expected))
    assert agree.mean() > 0.998                          # only pixel centres on an exact edge may differ
    both = np.isfinite(depth) & np.isfinite(expected)
    close = np.isclose(depth[both], expected[both], rtol=DEPTH_RTOL, atol=0)
    assert close.mean() > 0.998


# --------------------------------------------------------------------------- color ---
def test_a_box_face_shows_its_shaded_color_at_the_center():
    rgb = np.array([0.8, 0.3, 0.1])
    scene = scene_of(Shape("box", pose=pose((0, 0, -2.0)), size=[0.4, 0.4, 0.4], color=[*rgb, 1.0]))
    G = random_rigid(7)                       # the light follows the camera: any pose, same color
    scene.set_link_poses(G[None, :3, :3], G[None, :3, 3])
    color, _ = render(scene, G, W, H, FOV, 0.01, 10.0)
    intensity = AMBIENT + (1 - AMBIENT) * LIGHT[2]          # the face normal is the camera's +z
    expected = np.floor(255 * rgb * intensity + 0.5).astype(np.uint8)
    assert np.array_equal(color[H // 2, W // 2], expected)
    assert np.array_equal(expected, shade(rgb, [0, 0, 1]))
    assert np.array_equal(color[0, 0], BACKGROUND)
    # the face fills a square of side f * 0.4 / 1.8 pixels around the centre, all one color
    f = intrinsics(W, H, FOV)[0]
    half = int(0.2 * f / 1.8) - 1
    face = color[H // 2 - half:H // 2 + half, W // 2 - half:W // 2 + half]
    assert np.all(face == expected)


def test_mono_is_the_luminance_of_the_color_image():
    shapes = [Shape("box", pose=pose((-0.5, 0, -2.5), (0.3, 0.5, 0)), size=[0.6, 0.6, 0.6], color=[0.9, 0.2, 0.1, 1]),
              Shape("sphere", pose=pose((0.6, 0.2, -3.0)), radius=0.5, color=[0.1, 0.4, 0.9, 1]),
              Shape("plane", pose=pose((0, -1, 0), (-np.pi / 2, 0, 0)), color=[0.3, 0.8, 0.3, 1])]
    scene = scene_of(*shapes)
    color, depth = render(scene, np.eye(4), W, H, FOV, 0.01, 10.0)
    mono, depth_mono = render(scene, np.eye(4), W, H, FOV, 0.01, 10.0, mono=True)
    assert mono.shape == (H, W) and mono.dtype == np.uint8
    assert np.array_equal(depth, depth_mono)
    lum = color.astype(float) @ [0.299, 0.587, 0.114]
    assert np.abs(mono - lum).max() <= 1.0              # rounding of each channel first
    assert len(np.unique(mono)) >= 4                    # sky, box faces, sphere facets, ground


def test_buffers_are_written_in_place():
    scene = scene_of(Shape("box", pose=pose((0, 0, -2.0)), size=[0.4, 0.4, 0.4]))
    color = np.zeros((H, W, 3), np.uint8)
    depth = np.zeros((H, W), np.float32)
    c, d = render(scene, np.eye(4), W, H, FOV, 0.01, 10.0, color=color, depth=depth)
    assert c is color and d is depth and np.isfinite(depth).any() and color.any()
    with pytest.raises(ValueError):
        render(scene, np.eye(4), W, H, FOV, 0.01, 10.0, color=np.zeros((H, W), np.uint8))
    with pytest.raises(ValueError):
        render(scene, np.eye(4), W, H, FOV, 2.0, 1.0)


def test_one_sided_solids_and_two_sided_meshes():
    """A camera inside a box sees out of it (back faces culled, as for SR1's cameras inside
    their lens cylinders); a mesh square seen from behind is still drawn."""
    inside = scene_of(Shape("box", size=[1.0, 1.0, 1.0]), Shape("box", pose=pose((0, 0, -3)), size=[1, 1, 1]))
    _, depth = render(inside, np.eye(4), W, H, FOV, 0.01, 10.0)
    assert depth[H // 2, W // 2] == pytest.approx(2.5, rel=DEPTH_RTOL)
    square = Shape("mesh", pose=pose((0, 0, -2.0), (0, np.pi, 0)), vertices=np.array(
        [[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], float), faces=np.array([[0, 1, 2], [0, 2, 3]]))
    for flip in (0.0, np.pi):
        square.pose = pose((0, 0, -2.0), (0, flip, 0))
        _, depth = render(scene_of(square), np.eye(4), W, H, FOV, 0.01, 10.0)
        assert depth[H // 2, W // 2] == pytest.approx(2.0, rel=DEPTH_RTOL)


def test_tessellations_are_closed_and_wound_outward():
    for kind, size, volume in (("box", [0.1, 0.2, 0.3], 0.048), ("sphere", [0.5, 0, 0], 4 / 3 * np.pi / 8),
                               ("cylinder", [0.3, 0.4, 0], np.pi * 0.09 * 0.8),
                               ("capsule", [0.3, 0.4, 0], np.pi * 0.09 * 0.8 + 4 / 3 * np.pi * 0.027),
                               ("cone", [0.3, 0.4, 0], np.pi * 0.09 * 0.8 / 3)):
        V, F = tessellate(kind, np.array(size), 48)
        signed = np.einsum("ij,ij->i", V[F[:, 0]], np.cross(V[F[:, 1]], V[F[:, 2]])).sum() / 6
        assert volume * 0.97 < signed <= volume * (1 + 1e-12), kind     # inscribed: a little less
        edges = {}
        for a, b, c in F:
            for e in ((a, b), (b, c), (c, a)):
                edges[e] = edges.get(e, 0) + 1
        assert all(edges.get((b, a)) == 1 for (a, b) in edges), kind   # each edge once each way


# ---------------------------------------------------------------------- ray casting ---
@pytest.mark.parametrize("kind", ["plane", "box", "mesh"])
def test_a_wall_reads_d_on_axis_and_d_over_cos_theta_off_axis(kind):
    d = 2.5
    if kind == "plane":
        wall = Shape("plane", pose=pose((d, 0, 0), (0, -np.pi / 2, 0)))     # normal -x, toward the origin
    elif kind == "box":
        wall = Shape("box", pose=pose((d + 0.5, 0, 0)), size=[1.0, 50.0, 50.0])
    else:
        wall = Shape("mesh", pose=pose((d, 0, 0)), vertices=np.array(
            [[0, -25, -25], [0, 25, -25], [0, 25, 25], [0, -25, 25]], float), faces=np.array([[0, 1, 2], [0, 2, 3]]))
    G = random_rigid(8)
    scene = scene_of(wall, G=G)
    theta = np.array([0.0, 0.1, -0.4, 0.7, -1.2, 1.3])
    local = np.c_[np.cos(theta), np.sin(theta), np.zeros_like(theta)]
    tilt = np.c_[np.cos(theta), np.zeros_like(theta), np.sin(theta)]
    dirs = np.r_[local, tilt] @ G[:3, :3].T
    origins = np.tile(G[:3, 3], (len(dirs), 1))
    out = np.empty(len(dirs))
    assert cast_rays(scene, origins, dirs, 100.0, out) is out
    expected = d / np.cos(np.r_[theta, theta])
    assert np.allclose(out, expected, rtol=0, atol=RAY_TOL * 10)
    short = cast_rays(scene, origins, dirs, 3.0)
    assert np.array_equal(np.isfinite(short), expected <= 3.0)
    away = cast_rays(scene, origins, -dirs, 100.0)                  # nothing behind
    assert np.all(np.isinf(away))
    assert np.all(np.isinf(cast_rays(scene_of(), origins, dirs, 100.0)))


CASES = [  # shape, ray origin, ray direction, distance (shape frames at the world origin)
    (Shape("sphere", radius=1.0), [-5, 0, 0], [1, 0, 0], 4.0),
    (Shape("sphere", radius=1.0), [-5, 0.6, 0], [1, 0, 0], 5 - 0.8),
    (Shape("sphere", radius=1.0), [-5, 1.01, 0], [1, 0, 0], np.inf),
    (Shape("box", size=[2, 4, 6]), [-5, 1.9, 2.9], [1, 0, 0], 4.0),
    (Shape("box", size=[2, 2, 2], pose=pose(rotvec=(0, 0, np.pi / 4))), [-5, 0, 0], [1, 0, 0], 5 - np.sqrt(2)),
    (Shape("box", size=[2, 4, 6]), [-5, 0, 0], unit([1, 0, 1]), np.inf),     # passes above (z = 5 at x = 0)
    (Shape("cylinder", radius=0.5, length=2), [-5, 0, 0.9], [1, 0, 0], 4.5),
    (Shape("cylinder", radius=0.5, length=2), [-5, 0.3, 0], [1, 0, 0], 5 - 0.4),
    (Shape("cylinder", radius=0.5, length=2), [0.2, 0.1, 10], [0, 0, -1], 9.0),   # top cap
    (Shape("cylinder", radius=0.5, length=2), [-5, 0, 1.1], [1, 0, 0], np.inf),
    (Shape("cylinder", radius=0.5, length=2), [-3, 0, 3], unit([1, 0, -1]), np.sqrt(2) * 2.5),   # side, z = 0.5
    (Shape("cylinder", radius=0.5, length=2), [-2, 0, 3], unit([1, 0, -1]), np.sqrt(2) * 2.0),   # cap, slanted
    (Shape("capsule", radius=0.5, length=2), [-5, 0, 0], [1, 0, 0], 4.5),
    (Shape("capsule", radius=0.5, length=2), [0, 0, 10], [0, 0, -1], 10 - 1.5),
    (Shape("capsule", radius=0.5, length=2), [-5, 0, 1.3], [1, 0, 0], 5 - 0.4),    # end sphere
    (Shape("capsule", radius=0.5, length=2), [-5, 0, 1.6], [1, 0, 0], np.inf),
    (Shape("cone", radius=1.0, length=2), [-5, 0, 0], [1, 0, 0], 4.5),              # radius 0.5 at z = 0
    (Shape("cone", radius=1.0, length=2), [0.3, 0, -10], [0, 0, 1], 9.0),            # base disk
    (Shape("cone", radius=1.0, length=2), [0.3, 0, 10], [0, 0, -1], 9.6),            # side: r(z) = 0.3
    (Shape("cone", radius=1.0, length=2), [0, 0, 10], [0, 0, -1], 9.0),              # the apex (see below)
    (Shape("cone", radius=1.0, length=2), [-5, 0, 1.01], [1, 0, 0], np.inf),
    (Shape("plane"), [1, 2, 3], unit([0.3, 0, -1]), 3 * np.linalg.norm([0.3, 0, -1])),
    (Shape("plane"), [1, 2, -3], [0, 0, 1], np.inf),                                 # from inside the half-space
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_cast_rays_hits_primitives_at_their_exact_distance(case):
    """Closed forms to RAY_TOL, except the ray along a cone's axis onto its apex: there the
    quadric's two roots coincide, and a double root moves by sqrt(rounding) ~ 1e-7."""
    shape, o, d, expected = CASES[case]
    tol = 1e-6 if shape.kind == "cone" and np.allclose(o[:2], 0) else RAY_TOL * 10
    for seed in range(3):                    # the whole scene and the ray moved rigidly
        G = random_rigid(20 + seed)
        Tw = G @ shape.pose
        s = Shape(shape.kind, pose=Tw, size=shape.size, radius=shape.radius, length=shape.length)
        o_w = G[:3, :3] @ o + G[:3, 3]
        d_w = G[:3, :3] @ unit(d)
        out = cast_rays(scene_of(s), o_w[None], d_w[None], 50.0)
        if np.isinf(expected):
            assert np.isinf(out[0])
        else:
            assert abs(out[0] - expected) < tol, (out[0], expected)


@pytest.mark.parametrize("kind", ["sphere", "box", "cylinder", "capsule", "cone"])
def test_a_ray_from_inside_a_solid_does_not_see_it(kind):
    s = Shape(kind, size=[1, 1, 1], radius=0.5, length=1.0)
    other = Shape("sphere", pose=pose((5, 0, 0)), radius=1.0)
    out = cast_rays(scene_of(s, other), np.zeros((2, 3)), np.array([[1.0, 0, 0], [-1.0, 0, 0]]), 50.0)
    assert out[0] == pytest.approx(4.0, abs=RAY_TOL) and np.isinf(out[1])


def test_cast_rays_hits_a_tetrahedron_mesh_from_both_sides():
    V = np.array([[3, -1, -1], [3, 1, -1], [3, 0, 1], [5, 0, 0]], float)
    F = np.array([[0, 2, 1], [0, 1, 3], [1, 2, 3], [2, 0, 3]])
    G = random_rigid(9)
    scene = scene_of(Shape("mesh", pose=pose((0.0, 0.0, 0.0)), vertices=V, faces=F), G=G)
    origins = np.array([[0, 0, 0], [4, 0, 0], [0, 0, 0], [0, 0.2, -0.3], [10, 0, 0], [0, 5, 0]], float)
    dirs = np.array([[1, 0, 0], [-1, 0, 0], unit([3, 0.5, 0]), [1, 0, 0], [-1, 0, 0], [1, 0, 0]])
    # face x = 3 at 3; from inside the tetrahedron the back of that face at 1; through
    # (3, 0.5, 0) at |(3, .5, 0)|; at (3, .2, -.3); from +x the apex faces: x = 5 at the apex; miss
    expected = [3.0, 1.0, np.linalg.norm([3, 0.5, 0]), 3.0, 5.0, np.inf]
    out = cast_rays(scene, origins @ G[:3, :3].T + G[:3, 3], dirs @ G[:3, :3].T, 50.0)
    assert np.allclose(out[:5], expected[:5], atol=1e-9, rtol=0) and np.isinf(out[5])


def test_scene_follows_link_poses_in_compile_order():
    """Two models, one with a moving body: Scene(models, link_names) takes poses in
    compile_models order, and set_link_poses moves what render and cast_rays see."""
    from mbsim_ros.dynamics.compiled import compile_models
    ground = Model("ground")
    ground.add_link(Link("wall", visuals=[Shape("box", pose=pose((10, 0, 0)), size=[1, 20, 20])]))
    ground.add_joint(Joint("weld", "fixed", None, "wall"))
    ball = Model("ball")
    ball.add_link(Link("ball", 1.0, inertia=0.01 * np.eye(3), visuals=[Shape("sphere", radius=0.5)]))
    ball.add_joint(Joint("free", "free", None, "ball"))
    models = [ball.finalize(), ground.finalize()]
    c = compile_models(models)
    scene = Scene(models, c.link_names)
    R = np.tile(np.eye(3), (2, 1, 1))
    p = np.zeros((2, 3))
    p[c.link_names.index("ball")] = [4.0, 0, 0]
    scene.set_link_poses(R, p)
    out = cast_rays(scene, np.zeros((1, 3)), np.array([[1.0, 0, 0]]), 50.0)
    assert out[0] == pytest.approx(3.5, abs=RAY_TOL)
    p[c.link_names.index("ball")] = [0.0, 3.0, 0]
    scene.set_link_poses(R, p)
    assert cast_rays(scene, np.zeros((1, 3)), np.array([[1.0, 0, 0]]), 50.0)[0] == pytest.approx(9.5, abs=RAY_TOL)
    _, depth = render(scene, look_at([0, 0, 0], [1, 0, 0]), W, H, FOV, 0.01, 50.0)
    assert depth[H // 2, W // 2] == pytest.approx(9.5, rel=DEPTH_RTOL)
    with pytest.raises(ValueError):
        Scene(models, list(reversed(c.link_names)))


def test_range_directions_follow_openhrp():
    dirs = range_directions(4.18879, 0.00613592)
    n = 2 * int(np.floor(4.18879 / 2 / 0.00613592)) + 1
    assert dirs.shape == (n, 3) and n == 683
    assert np.allclose(dirs[n // 2], [0, 0, -1])
    th = (0 - n // 2) * 0.00613592
    assert np.allclose(dirs[0], [-np.sin(th), 0, -np.cos(th)])


# ------------------------------------------------------------------ the bundled world ---
@pytest.fixture(scope="module")
def sr1():
    models, _ = cli._load(cli.DEFAULT_WORLD, False)
    return models, world_scene(models)


def test_left_camera_sees_the_floor_and_is_fast(sr1):
    import time
    models, scene = sr1
    cam = next(s for s in models[0].sensors if s.name == "LeftCamera")
    T = sensor_pose(scene, cam)
    color, depth = render(scene, T, 320, 240, 0.785398, 0.01, 10.0)
    # looking 30 degrees down from 1.39 m: the floor's top face fills the lower part
    floor_top = scene.bounds(["FLOOR"])[1][2]
    r = rays(320, 240, 0.785398)
    for v in (150, 200, 239):
        for u in (0, 100, 319):
            down = -(T[:3, :3] @ r[v, u])[2]                   # metres down per metre of depth
            assert depth[v, u] == pytest.approx((T[2, 3] - floor_top) / down, rel=DEPTH_RTOL)
    best = np.inf
    for _ in range(10):
        t = time.perf_counter()
        render(scene, T, 320, 240, 0.785398, 0.01, 10.0, color, depth)
        best = min(best, time.perf_counter() - t)
    assert best < 0.010                       # the hard limit (measured: about 0.25 ms)


def test_chest_range_scan_is_fast_and_sees_the_floor(sr1):
    import time
    models, scene = sr1
    s = next(s for s in models[0].sensors if s.name == "ChestRange")
    T = sensor_pose(scene, s)
    dirs = range_directions(s.params["scanAngle"], s.params["scanStep"]) @ T[:3, :3].T
    origins = np.tile(T[:3, 3], (len(dirs), 1))
    out = np.empty(len(dirs))
    cast_rays(scene, origins, dirs, s.params["maxDistance"], out)
    # rays going down hit the floor's top face where it is (or the robot's own legs, nearer)
    lo, hi = scene.bounds(["FLOOR"])
    down = dirs[:, 2] < -0.05
    floor = (T[2, 3] - hi[2]) / -dirs[down, 2]
    at = T[:3, 3] + floor[:, None] * dirs[down]
    floor[np.any((at[:, :2] < lo[:2]) | (at[:, :2] > hi[:2]), axis=1) | (floor > 10.0)] = np.inf
    assert np.all(out[down] <= floor + 1e-9)
    on_floor = np.isfinite(floor)
    assert np.mean(np.abs(out[down][on_floor] - floor[on_floor]) < 1e-9) > 0.5
    assert np.all(np.isinf(out[down][~on_floor]))          # past the 10 m floor's edge: nothing
    best = np.inf
    for _ in range(10):
        t = time.perf_counter()
        cast_rays(scene, origins, dirs, s.params["maxDistance"], out)
        best = min(best, time.perf_counter() - t)
    assert best < 0.001                       # measured: about 0.1 ms for 683 rays


# ------------------------------------------------------------------------- images ---
def test_write_png_round_trips(tmp_path):
    from PIL import Image
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (7, 11, 3), dtype=np.uint8)
    grey = rng.integers(0, 256, (5, 3), dtype=np.uint8)
    write_png(tmp_path / "rgb.png", rgb)
    write_png(tmp_path / "grey.png", grey)
    with Image.open(tmp_path / "rgb.png") as im:
        assert im.mode == "RGB" and np.array_equal(np.asarray(im), rgb)
    with Image.open(tmp_path / "grey.png") as im:
        assert im.mode == "L" and np.array_equal(np.asarray(im), grey)
    with pytest.raises(ValueError):
        write_png(tmp_path / "bad.png", rgb.astype(float))


def test_depth_image_is_bright_near_and_black_for_nothing():
    d = np.array([[1.0, 2.0], [4.0, np.inf]], np.float32)
    assert depth_to_image(d).tolist() == [[255, 128], [64, 0]]
    assert np.all(depth_to_image(np.full((2, 2), np.inf)) == 0)


# ---------------------------------------------------------------------------- CLI ---
def test_cli_renders_the_left_camera_to_a_png(tmp_path, capsys):
    from PIL import Image
    out, dep = tmp_path / "left.png", tmp_path / "left_depth.png"
    assert cli.main(["render", "-o", str(out), "--camera", "LeftCamera", "--depth", str(dep)]) == 0
    assert str(out) in capsys.readouterr().out
    with Image.open(out) as im:
        a = np.asarray(im)
    assert a.shape == (240, 320, 3)
    assert np.all(a[0, 0] == BACKGROUND) and not np.all(a[-1, 160] == BACKGROUND)   # sky above, floor below
    with Image.open(dep) as im:
        assert np.asarray(im).shape == (240, 320) and np.asarray(im)[-1, 160] > 0


def test_cli_default_and_look_at_views(tmp_path, capsys):
    from PIL import Image
    assert cli.main(["render", "-o", str(tmp_path / "a.png"), "--width", "80", "--height", "60"]) == 0
    assert cli.main(["render", "-o", str(tmp_path / "b.png"), "--from=-2,1,1.5", "--to", "0,0,0.8",
                     "--width", "64", "--height", "48"]) == 0
    for name, shape in (("a.png", (60, 80, 3)), ("b.png", (48, 64, 3))):
        with Image.open(tmp_path / name) as im:
            a = np.asarray(im)
        assert a.shape == shape and len(np.unique(a.reshape(-1, 3), axis=0)) > 3   # robot, floor, sky


@pytest.mark.parametrize("argv, says", [
    (["--camera", "NoSuchCamera"], "LeftCamera, RightCamera"),
    (["--from", "1,2", "--to", "0,0,0"], "--from"),
    (["--from", "1,2,3"], "--to"),
    (["--camera", "LeftCamera", "--from", "1,2,3", "--to", "0,0,0"], "either"),
])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, says):
    out = tmp_path / "x.png"
    assert cli.main(["render", "-o", str(out)] + argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("mbsim: ") and says in err
    assert not out.exists()
