"""Contact points between collision shapes (mbsim_ros/dynamics/collision/).

Every analytic case lists its exact contacts (point, normal from b into a, depth), checked in
place, with a and b swapped, and after rigid motions of the whole scene. Tolerances:
  TOL_EXACT = 1e-9 (m, and for unit normals): closed forms, and GJK/EPA on polytopes or on a
      sphere/capsule core against a polytope or a flat cap (they end exactly). They are a few
      dozen operations on numbers of order 1: rounding stays near 1e-15.
  TOL_GJK = 1e-6: GJK/EPA where a curved side (cylinder, cone) meets something shallowly. EPA
      stops when the support point gains less than 1e-10 of the shapes' size; measured errors
      are 1e-12 in depth and a few 1e-6 in the normal (test_curved_pairs_match_...).
  TOL_EPA_DEEP = 1e-5 (points), 1e-4 (normals), 1e-9 (depth): a sphere's centre deep inside a
      cylinder. EPA's polytope (at most EPA_MAX_VERTS vertices) only approximates the curved
      boundary; the depth is stationary in the normal, so it is good while the normal is not
      (measured over 400 random cases: 1e-6, 2e-5, 2e-11).
"""
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import mbsim_ros as mb
from mbsim_ros.dynamics.collision import collide as collision_pass
from mbsim_ros.dynamics.collision.geoms import compile_geoms, contacts_list
from mbsim_ros.dynamics.collision.layout import MAX_MANIFOLD, carve_contacts, carve_geoms
from mbsim_ros.dynamics.compiled import compile_models
from mbsim_ros.model import Joint, Link, Model, Shape

TOL_EXACT = 1e-9
TOL_GJK = 1e-6
TOL_EPA_DEEP = (1e-5, 1e-4, 1e-9)
Z = np.array([0.0, 0.0, 1.0])
MODELS = mb.__file__.replace("__init__.py", "data/models/")


# ------------------------------------------------------------------------- helpers ---
def pose(p=(0.0, 0.0, 0.0), rotvec=(0.0, 0.0, 0.0)):
    T = np.eye(4)
    T[:3, :3] = Rotation.from_rotvec(rotvec).as_matrix()
    T[:3, 3] = p
    return T


def free_body(name, shapes):
    """A one-link model on a free joint carrying these collision shapes."""
    m = Model(name)
    m.add_link(Link(f"{name}_link", 1.0, inertia=0.01 * np.eye(3), collisions=list(shapes)))
    m.add_joint(Joint(f"{name}_free", "free", None, f"{name}_link"))
    return m.finalize()


def world(*shapes, capacity=None):
    """Each shape on its own free body (bodies of different models always may collide)."""
    models = [free_body(f"body{i}", [s]) for i, s in enumerate(shapes)]
    return compile_geoms(models, compile_models(models), capacity=capacity)


def collide(geoms, poses, margin=0.0):
    """The contacts with link k at the world pose poses[k] (4x4)."""
    cf, ci, contacts = geoms.new_workspace()
    R = np.ascontiguousarray([T[:3, :3] for T in poses])
    p = np.ascontiguousarray([T[:3, 3] for T in poses])
    n = collision_pass.collide_kernel(geoms.gf, geoms.gi, cf, ci, R, p, margin)
    return contacts_list(geoms, contacts, n)


def check(contacts, expected, tol):
    """Each expected (point, normal, depth) is one contact, and nothing else is reported.
    tol: one number, or (point, normal, depth) tolerances."""
    tol_p, tol_n, tol_d = tol if isinstance(tol, tuple) else (tol, tol, tol)
    assert len(contacts) == len(expected), [c["point"] for c in contacts]
    unmatched = list(contacts)
    for point, normal, depth in expected:
        dist = [np.linalg.norm(c["point"] - point) for c in unmatched]
        c = unmatched.pop(int(np.argmin(dist)))
        assert np.allclose(c["point"], point, atol=tol_p), (c["point"], point)
        assert np.allclose(c["normal"], normal, atol=tol_n), (c["normal"], normal)
        assert abs(c["depth"] - depth) < tol_d, (c["depth"], depth)


def unit(v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


SPHERE = Shape("sphere", radius=0.3)
SMALL_SPHERE = Shape("sphere", radius=0.2)
BOX = Shape("box", size=[0.6, 0.4, 0.2])                 # half extents 0.3, 0.2, 0.1
SLAB = Shape("box", size=[2.0, 2.0, 0.2])                # top face z = 0.1 at the origin
CUBE = Shape("box", size=[0.2, 0.2, 0.2])
CAPSULE = Shape("capsule", radius=0.1, length=0.6)
CYLINDER = Shape("cylinder", radius=0.2, length=0.6)
CONE = Shape("cone", radius=0.2, length=0.6)             # apex at +0.3, base circle at -0.3
PLANE = Shape("plane")
CUBE_VERTS = 0.1 * np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
CUBE_MESH = Shape("mesh", vertices=CUBE_VERTS)
TETRA = Shape("mesh", vertices=0.2 * np.array([[0, 0, -1], [1, 0, 0.5], [-0.5, 0.8, 0.5], [-0.5, -0.8, 0.5]]))
LYING = (0.0, np.pi / 2, 0.0)                            # a rotation turning the geom's z onto x


def sphere_sphere():
    ca, cb = np.array([0.1, 0.2, 0.4]), np.zeros(3)
    d = np.linalg.norm(ca - cb)
    n = (ca - cb) / d
    return [((ca - 0.3 * n + cb + 0.2 * n) / 2, n, 0.5 - d)]


def tilted_box_on_plane():
    """BOX turned 30 degrees about x: its two corners at local y = -0.2, z = -0.1 go lowest,
    2 mm under the plane."""
    R = Rotation.from_rotvec([np.pi / 6, 0, 0]).as_matrix()
    low = R @ [0, -0.2, -0.1]
    height = -low[2] - 0.002
    return pose([0, 0, height], [np.pi / 6, 0, 0]), [
        (np.array([x, low[1], -0.001]), Z, 0.002) for x in (-0.3, 0.3)]


def tilted_capsule_on_plane():
    """CAPSULE leaning 70 degrees: one end sphere 3 mm into the plane."""
    axis = Rotation.from_rotvec([0, 1.2217304763960306, 0]).apply(Z)
    height = 0.3 * axis[2] + 0.1 - 0.003
    end = np.array([0, 0, height]) - 0.3 * axis
    return pose([0, 0, height], [0, 1.2217304763960306, 0]), [
        (end - 0.1 * Z + 0.0015 * Z, Z, 0.003)]


def tilted_cylinder_on_plane():
    """CYLINDER turned 30 degrees about x: the lowest point of its bottom rim, 2 mm deep."""
    R = Rotation.from_rotvec([np.pi / 6, 0, 0]).as_matrix()
    axis = R @ Z
    down = Z - Z.dot(axis) * axis
    lowest = -0.3 * axis - 0.2 * down / np.linalg.norm(down)
    height = -lowest[2] - 0.002
    return pose([0, 0, height], [np.pi / 6, 0, 0]), [
        (lowest + [0, 0, height + 0.001], Z, 0.002)]


def corner_down_rotvec():
    """A rotation taking the cube's corner direction (-1, -1, -1) onto -z."""
    return Rotation.align_vectors([[0, 0, -1]], [unit([-1, -1, -1])])[0].as_rotvec()


def corner_down_box_on_box():
    """CUBE standing on one corner, 1 mm into SLAB's top face: one point."""
    rv = corner_down_rotvec()
    height = 0.1 + 0.1 * np.sqrt(3) - 0.001
    return pose([0.2, -0.1, height], rv), [(np.array([0.2, -0.1, 0.0995]), Z, 0.001)]


def edge_edge_boxes():
    """Unit cubes turned 45 degrees about x (a, above) and about y (b): their edges cross."""
    top_b = np.sqrt(0.5)
    height = top_b + np.sqrt(0.5) - 0.01
    return pose([0, 0, height], [np.pi / 4, 0, 0]), pose([0, 0, 0], [0, np.pi / 4, 0]), [
        (np.array([0, 0, top_b - 0.005]), Z, 0.01)]


def rim(radius, z, count):
    return [np.array([radius * np.cos(t), radius * np.sin(t), z])
            for t in np.linspace(0, 2 * np.pi, count, endpoint=False)]


def box_corners(half, z):
    return [np.array([x, y, z]) for x in (-half[0], half[0]) for y in (-half[1], half[1])]


UNIT_CUBE = Shape("box", size=[1.0, 1.0, 1.0])
EDGE_Y, EDGE_Z = 0.1 * np.sqrt(0.5), 0.3 * np.sqrt(0.5)

# (name, shape a, pose a, shape b, pose b, [(point, normal b->a, depth)] or a check, tol)
CASES = [
    ("sphere-sphere", SPHERE, pose([0.1, 0.2, 0.4]), SMALL_SPHERE, pose(), sphere_sphere(), TOL_EXACT),
    ("sphere-plane", SPHERE, pose([0.1, 0.2, 0.29]), PLANE, pose(),
     [((0.1, 0.2, -0.005), Z, 0.01)], TOL_EXACT),
    ("box flat on plane", BOX, pose([0, 0, 0.099]), PLANE, pose(),
     [(c, Z, 0.001) for c in box_corners([0.3, 0.2], -0.0005)], TOL_EXACT),
    ("box tilted on plane", BOX, *tilted_box_on_plane()[:1], PLANE, pose(), tilted_box_on_plane()[1], TOL_EXACT),
    ("capsule lying on plane", CAPSULE, pose([0, 0, 0.099], LYING), PLANE, pose(),
     [((x, 0, -0.0005), Z, 0.001) for x in (-0.3, 0.3)], TOL_EXACT),
    ("capsule leaning on plane", CAPSULE, *tilted_capsule_on_plane()[:1], PLANE, pose(),
     tilted_capsule_on_plane()[1], TOL_EXACT),
    ("cylinder on its side on plane", CYLINDER, pose([0, 0, 0.199], LYING), PLANE, pose(),
     [((x, 0, -0.0005), Z, 0.001) for x in (-0.3, 0.3)], TOL_EXACT),
    ("cylinder tilted on plane", CYLINDER, *tilted_cylinder_on_plane()[:1], PLANE, pose(),
     tilted_cylinder_on_plane()[1], TOL_EXACT),
    ("cone apex down on plane", CONE, pose([0.1, 0, 0.298], [np.pi, 0, 0]), PLANE, pose(),
     [((0.1, 0, -0.001), Z, 0.002)], TOL_EXACT),
    ("convex vertex down on plane", TETRA, pose([0, 0, 0.199]), PLANE, pose(),
     [((0, 0, -0.0005), Z, 0.001)], TOL_EXACT),
    ("convex box flat on plane", CUBE_MESH, pose([0, 0, 0.099]), PLANE, pose(),
     [(c, Z, 0.001) for c in box_corners([0.1, 0.1], -0.0005)], TOL_EXACT),
    ("capsule-sphere", CAPSULE, pose([0, 0, 0], LYING), SMALL_SPHERE, pose([0.2, 0, 0.28]),
     [((0.2, 0, 0.09), -Z, 0.02)], TOL_EXACT),
    # end (0.3, 0, 0), centre (0.45, 0, 0.2): 0.25 apart along (0.6, 0, 0.8); surface points
    # (0.36, 0, 0.08) of the capsule and (0.33, 0, 0.04) of the sphere
    ("capsule-sphere past the end", CAPSULE, pose([0, 0, 0], LYING), SMALL_SPHERE, pose([0.45, 0, 0.2]),
     [((0.345, 0, 0.06), (-0.6, 0, -0.8), 0.05)], TOL_EXACT),
    ("capsules crossing", CAPSULE, pose([0, 0, 0.18], LYING), CAPSULE, pose([0, 0, 0], [np.pi / 2, 0, 0]),
     [((0, 0, 0.09), Z, 0.02)], TOL_EXACT),
    ("capsules parallel", CAPSULE, pose([0.2, 0, 0.19], LYING), CAPSULE, pose([0, 0, 0], LYING),
     [((x, 0, 0.095), Z, 0.01) for x in (-0.1, 0.3)], TOL_EXACT),
    ("box-sphere face", BOX, pose(), SMALL_SPHERE, pose([0.1, 0.05, 0.29]),
     [((0.1, 0.05, 0.095), -Z, 0.01)], TOL_EXACT),
    # nearest box point (0.3, 0, 0.1), sqrt(0.02) from the centre (0.4, 0, 0.2)
    ("box-sphere edge", BOX, pose(), SMALL_SPHERE, pose([0.4, 0, 0.2]),
     [((np.array([0.3, 0, 0.1]) + np.array([0.4, 0, 0.2]) - 0.2 * unit([1, 0, 1])) / 2,
       -unit([1, 0, 1]), 0.2 - np.sqrt(0.02))], TOL_EXACT),
    # the centre is 0.05 inside the +x face: depth 0.2 + 0.05, box point (0.3, 0.05, 0.02),
    # sphere point (0.05, 0.05, 0.02)
    ("box-sphere centre inside", BOX, pose(), SMALL_SPHERE, pose([0.25, 0.05, 0.02]),
     [((0.175, 0.05, 0.02), (-1, 0, 0), 0.25)], TOL_EXACT),
    ("capsule lying on box", CAPSULE, pose([0, 0, 0.199], LYING), SLAB, pose(),
     [((x, 0, 0.0995), Z, 0.001) for x in (-0.3, 0.3)], TOL_EXACT),
    ("capsule upright on box", CAPSULE, pose([0.2, 0.3, 0.498]), SLAB, pose(),
     [((0.2, 0.3, 0.099), Z, 0.002)], TOL_EXACT),
    ("box on bigger box", CUBE, pose([0.2, 0.1, 0.199], [0, 0, np.pi / 6]), SLAB, pose(),
     [(np.array([0.2, 0.1, 0.0995]) + Rotation.from_rotvec([0, 0, np.pi / 6]).apply(c), Z, 0.001)
      for c in box_corners([0.1, 0.1], 0.0)], TOL_EXACT),
    ("box over the edge of a box", CUBE, pose([0.95, 0, 0.199]), SLAB, pose(),
     [((x, y, 0.0995), Z, 0.001) for x in (0.85, 1.0) for y in (-0.1, 0.1)], TOL_EXACT),
    # BOX turned 45 degrees about x has its top edge along x at y = 0.2 cos45 - 0.1 sin45,
    # z = 0.2 sin45 + 0.1 cos45; a's bottom face (the reference) clips it to x = +-0.1
    ("box face on a box edge", CUBE, pose([0, EDGE_Y, EDGE_Z + 0.099]), BOX, pose([0, 0, 0], [np.pi / 4, 0, 0]),
     [((x, EDGE_Y, EDGE_Z - 0.0005), Z, 0.001) for x in (-0.1, 0.1)], TOL_EXACT),
    ("convex face on a box edge", CUBE_MESH, pose([0, EDGE_Y, EDGE_Z + 0.099]), BOX, pose([0, 0, 0], [np.pi / 4, 0, 0]),
     [((x, EDGE_Y, EDGE_Z - 0.0005), Z, 0.001) for x in (-0.1, 0.1)], TOL_EXACT),
    ("box corner on box", CUBE, *corner_down_box_on_box()[:1], SLAB, pose(), corner_down_box_on_box()[1], TOL_EXACT),
    ("box edge across box edge", UNIT_CUBE, edge_edge_boxes()[0], UNIT_CUBE, edge_edge_boxes()[1],
     edge_edge_boxes()[2], TOL_EXACT),
    ("sphere-cylinder side", CYLINDER, pose(), SMALL_SPHERE, pose([0.35, 0, 0.1]),
     [((0.175, 0, 0.1), (-1, 0, 0), 0.05)], TOL_GJK),
    # the centre 0.05 inside the side: EPA against the curved side, depth 0.2 + 0.05
    ("sphere centre inside cylinder", CYLINDER, pose(), SMALL_SPHERE, pose([0.15, 0, 0]),
     [((0.075, 0, 0), (-1, 0, 0), 0.25)], TOL_EPA_DEEP),
    ("sphere-cylinder cap", CYLINDER, pose(), SMALL_SPHERE, pose([0.05, 0.1, 0.49]),
     [((0.05, 0.1, 0.295), -Z, 0.01)], TOL_EXACT),
    ("cylinders crossing", CYLINDER, pose([0, 0, 0.39], LYING), CYLINDER, pose([0, 0, 0], [np.pi / 2, 0, 0]),
     [((0, 0, 0.195), Z, 0.01)], TOL_GJK),
    ("cylinder upright on box", CYLINDER, pose([0.1, 0, 0.399]), SLAB, pose(), "rim", TOL_EXACT),
    ("cylinder on its side on box", CYLINDER, pose([0, 0.1, 0.299], LYING), SLAB, pose(),
     [((x, 0.1, 0.0995), Z, 0.001) for x in (-0.3, 0.3)], TOL_EXACT),
    ("cone apex down on box", CONE, pose([0, 0, 0.398], [np.pi, 0, 0]), SLAB, pose(),
     [((0, 0, 0.099), Z, 0.002)], TOL_EXACT),
    ("cone standing on box", CONE, pose([0, 0, 0.399]), SLAB, pose(), "rim", TOL_EXACT),
    ("convex box on box", CUBE_MESH, pose([0.2, 0.1, 0.199]), SLAB, pose(),
     [(np.array([0.2, 0.1, 0.0995]) + c, Z, 0.001) for c in box_corners([0.1, 0.1], 0.0)], TOL_EXACT),
    ("convex box on convex box", CUBE_MESH, pose([0.05, 0.05, 0.199]), CUBE_MESH, pose(),
     [((x, y, 0.0995), Z, 0.001) for x in (-0.05, 0.1) for y in (-0.05, 0.1)], TOL_EXACT),
    ("sphere-convex face", CUBE_MESH, pose(), SMALL_SPHERE, pose([0.02, -0.03, 0.29]),
     [((0.02, -0.03, 0.095), -Z, 0.01)], TOL_EXACT),
    # the centre is 0.03 under the top face: depth 0.23, points (.., 0.1) and (.., -0.13)
    ("sphere centre inside convex", CUBE_MESH, pose(), SMALL_SPHERE, pose([0.02, -0.03, 0.07]),
     [((0.02, -0.03, -0.015), -Z, 0.23)], TOL_EXACT),
    ("capsule lying on convex", CAPSULE, pose([0.05, 0, 0.199], [np.pi / 2, 0, 0]), CUBE_MESH, pose(),
     [((0.05, y, 0.0995), Z, 0.001) for y in (-0.1, 0.1)], TOL_EXACT),
    ("convex corner on cylinder cap", CUBE_MESH, pose([0.02, 0.03, 0.3 + 0.1 * np.sqrt(3) - 0.002], corner_down_rotvec()),
     CYLINDER, pose(), [((0.02, 0.03, 0.299), Z, 0.002)], TOL_EXACT),
]


def expected_contacts(case):
    """A case's expected contacts as arrays (cases checked by check_rim have none)."""
    expected = case[5]
    return [(np.asarray(p, float), np.asarray(n, float), d) for p, n, d in expected]


def check_rim(contacts, centre_xy, radius, z, depth, tol):
    """A flat circle on a face: at least 3 points spread around it (here the 4 kept of 8
    samples: two diameters), all at the depth, normal +z."""
    assert len(contacts) >= 3
    pts = np.array([c["point"] for c in contacts])
    for c in contacts:
        assert np.allclose(c["normal"], Z, atol=tol) and abs(c["depth"] - depth) < tol
    assert np.allclose(pts[:, 2], z, atol=tol)
    assert np.allclose(np.linalg.norm(pts[:, :2] - centre_xy, axis=1), radius, atol=tol)
    spread = max(np.linalg.norm(p - q) for p in pts for q in pts)
    assert abs(spread - 2 * radius) < tol


def check_case(case, contacts, rigid=np.eye(4)):
    name, sa, pa, sb, pb, expected, tol = case
    R, t = rigid[:3, :3], rigid[:3, 3]
    if expected == "rim":
        # cylinder/cone standing on SLAB (top z = 0.1), 1 mm deep; checked in the rigid frame
        local = [dict(c, point=R.T @ (c["point"] - t), normal=R.T @ c["normal"]) for c in contacts]
        check_rim(local, pa[:2, 3], 0.2, 0.0995, 0.001, tol)
        return
    check(contacts, [(R @ p + t, R @ n, d) for p, n, d in expected_contacts(case)], tol)


IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_analytic_contacts(case):
    name, sa, pa, sb, pb, expected, tol = case
    contacts = collide(world(sa, sb), [pa, pb])
    check_case(case, contacts)
    for c in contacts:
        assert c["link_a"] == "body0_link" and c["link_b"] == "body1_link"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_swapping_a_and_b_flips_the_normal(case):
    name, sa, pa, sb, pb, expected, tol = case
    ab = collide(world(sa, sb), [pa, pb])
    ba = collide(world(sb, sa), [pb, pa])
    tol_p, tol_n, tol_d = tol if isinstance(tol, tuple) else (tol, tol, tol)
    assert len(ab) == len(ba)
    for c in ab:
        other = min(ba, key=lambda o: np.linalg.norm(o["point"] - c["point"]))
        assert np.allclose(other["point"], c["point"], atol=tol_p)
        assert np.allclose(other["normal"], -c["normal"], atol=tol_n)
        assert abs(other["depth"] - c["depth"]) < tol_d
        assert (other["link_a"], other["link_b"]) == ("body0_link", "body1_link")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_rigid_motion_moves_the_contacts_with_it(case):
    """The whole configuration turned and shifted (3 seeded random motions): points and
    normals turn with it, depths stay."""
    name, sa, pa, sb, pb, expected, tol = case
    geoms = world(sa, sb)
    rng = np.random.default_rng(7)
    for _ in range(3):
        rigid = np.eye(4)
        rigid[:3, :3] = Rotation.random(random_state=rng).as_matrix()
        rigid[:3, 3] = rng.uniform(-2, 2, 3)
        check_case(case, collide(geoms, [rigid @ pa, rigid @ pb]), rigid)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_moving_a_along_the_normal_separates(case):
    """a moved along +normal by the depth plus 1 mm: no contact at margin 0; with a 2 mm margin
    the same pair reports a 1 mm gap (depth -1e-3), so +normal really points from b to a."""
    name, sa, pa, sb, pb, expected, tol = case
    geoms = world(sa, sb)
    contacts = collide(geoms, [pa, pb])
    deepest = max(contacts, key=lambda c: c["depth"])
    moved = pa.copy()
    moved[:3, 3] += (deepest["depth"] + 1e-3) * deepest["normal"]
    assert collide(geoms, [moved, pb]) == []
    near = collide(geoms, [moved, pb], margin=2e-3)
    tol_d = tol[2] if isinstance(tol, tuple) else tol
    assert near and abs(max(c["depth"] for c in near) + 1e-3) < tol_d


def support_point(shape, T, d):
    """The point of a shape at world pose T furthest along d (a plain reference)."""
    R, p = T[:3, :3], T[:3, 3]
    dl = R.T @ d
    r, h = shape.radius, shape.length / 2
    radial = r * np.array([dl[0], dl[1], 0.0]) / max(np.hypot(dl[0], dl[1]), 1e-300)
    if shape.kind == "cylinder":
        x = radial + [0, 0, h if dl[2] >= 0 else -h]
    elif shape.kind == "cone":
        rim = radial + [0, 0, -h]
        x = rim if rim @ dl >= h * dl[2] else np.array([0, 0, h])
    elif shape.kind == "capsule":
        x = np.array([0, 0, h if dl[2] >= 0 else -h]) + r * dl / np.linalg.norm(dl)
    elif shape.kind == "box":
        x = np.where(dl >= 0, 1.0, -1.0) * np.asarray(shape.size) / 2
    else:
        x = shape.vertices[np.argmax(shape.vertices @ dl)]
    return R @ x + p


def penetration_reference(sa, Ta, sb, Tb, rng, starts=12):
    """The penetration depth as the smallest push of a along a unit n that separates the
    pair, min over n of [max over b of n.x - min over a of n.x], by Nelder-Mead on the sphere
    from random starts; returns (depth, n)."""
    from scipy.optimize import minimize

    def unit_from(angles):
        t, f = angles
        return np.array([np.sin(t) * np.cos(f), np.sin(t) * np.sin(f), np.cos(t)])

    def push(angles):
        n = unit_from(angles)
        return n @ support_point(sb, Tb, n) - n @ support_point(sa, Ta, -n)
    best = min((minimize(push, [np.arccos(rng.uniform(-1, 1)), rng.uniform(0, 2 * np.pi)],
                         method="Nelder-Mead", options=dict(xatol=1e-11, fatol=1e-15, maxiter=3000))
                for _ in range(starts)), key=lambda r: r.fun)
    return best.fun, unit_from(best.x)


CURVED_PAIRS = [(CYLINDER, CYLINDER), (CONE, CYLINDER), (CYLINDER, CUBE_MESH), (CONE, CONE),
                (CYLINDER, BOX), (CAPSULE, CONE)]


@pytest.mark.parametrize("sa, sb", CURVED_PAIRS, ids=[f"{a.kind}-{b.kind}" for a, b in CURVED_PAIRS])
def test_curved_pairs_match_the_support_function_minimum(sa, sb):
    """Random shallow overlaps (under 5 cm) of pairs that go through GJK/EPA: the deepest
    contact's depth is the minimum over all directions of the push that separates the pair
    (TOL_GJK; measured 1e-11), and the normal is that minimizing direction to 1e-4. GJK/EPA's
    normal is good to ~1e-5 on curved surfaces; where a rim meets a surface the push grows
    linearly with the normal's error, so the push along the reported normal matches the depth
    to 1e-5 (elsewhere the push is stationary in the normal)."""
    rng = np.random.default_rng(11)
    geoms = world(sa, sb)
    checked = 0
    while checked < 6:
        Ta, Tb = np.eye(4), np.eye(4)
        Ta[:3, :3] = Rotation.random(random_state=rng).as_matrix()
        Tb[:3, :3] = Rotation.random(random_state=rng).as_matrix()
        Ta[:3, 3] = rng.uniform(-0.35, 0.35, 3)
        contacts = collide(geoms, [Ta, Tb])
        if not contacts:
            continue
        depth, normal = penetration_reference(sa, Ta, sb, Tb, rng)
        if depth > 0.05:
            continue
        deepest = max(contacts, key=lambda c: c["depth"])
        n = deepest["normal"]
        assert abs(deepest["depth"] - depth) < TOL_GJK
        push = n @ support_point(sb, Tb, n) - n @ support_point(sa, Ta, -n)
        assert abs(push - deepest["depth"]) < 1e-5
        assert np.linalg.norm(n - normal) < 1e-4
        checked += 1


def test_sphere_deep_in_a_cylinder_anywhere():
    """EPA against a curved boundary from 150 random placements of a sphere's centre inside a
    cylinder (also near its axis and its rims, where EPA's polytope must hug the curve
    longest): the depth is the centre's distance to the nearest side or cap plus the radius,
    to 1e-5 (the TOL_EPA_DEEP point tolerance: the polytope has at most EPA_MAX_VERTS
    vertices); the normal is checked where it is well defined (one side clearly nearest)."""
    rng = np.random.default_rng(5)
    geoms = world(CYLINDER, SMALL_SPHERE)
    for _ in range(150):
        r, angle, z = rng.uniform(0, 0.19), rng.uniform(0, 2 * np.pi), rng.uniform(-0.29, 0.29)
        radial = np.array([np.cos(angle), np.sin(angle), 0.0])
        rigid = pose(rng.uniform(-1, 1, 3), Rotation.random(random_state=rng).as_rotvec())
        contacts = collide(geoms, [rigid, rigid @ pose(r * radial + [0, 0, z])])
        assert len(contacts) == 1
        to_side, to_cap = 0.2 - r, 0.3 - abs(z)
        assert abs(contacts[0]["depth"] - (0.2 + min(to_side, to_cap))) < TOL_EPA_DEEP[0]
        if to_side < to_cap - 0.02 and r > 0.05:
            assert np.linalg.norm(contacts[0]["normal"] + rigid[:3, :3] @ radial) < TOL_EPA_DEEP[1]
        elif to_cap < to_side - 0.02:
            assert np.linalg.norm(contacts[0]["normal"] + np.sign(z) * rigid[:3, :3] @ Z) < TOL_EPA_DEEP[1]


# A pair whose world boxes overlap but whose shapes miss each other by more than 1 cm.
NEAR_MISSES = [
    ("box edge past box edge", UNIT_CUBE, pose([0, 0.95, np.sqrt(2) - 0.01], [np.pi / 4, 0, 0]),
     UNIT_CUBE, pose([0, 0, 0], [0, np.pi / 4, 0])),
    ("box corner past box face", CUBE, pose([1.1, 1.1, 0.1 + 0.1 * np.sqrt(3) - 0.02], corner_down_rotvec()),
     SLAB, pose()),
    ("sphere past box corner", BOX, pose(), SMALL_SPHERE, pose([0.3 + 0.13, 0.2 + 0.13, 0.1 + 0.13])),
    ("sphere past capsule end", CAPSULE, pose([0, 0, 0], LYING), SMALL_SPHERE, pose([0.3 + 0.22, 0, 0.22])),
    ("capsules skew", CAPSULE, pose([0.45, 0.45, 0.0], LYING), CAPSULE, pose([0, 0, 0.0], [np.pi / 2, 0, 0])),
    ("cylinder past box corner", CYLINDER, pose([0.3 + 0.16, 0.2 + 0.16, 0.0]), BOX, pose()),
    ("cylinders rim past rim", CYLINDER, pose([0.3, 0.3, 0.59]), CYLINDER, pose()),
    ("cone tip past box edge", CONE, pose([0.33, 0, 0.38], [np.pi, 0, 0]), BOX, pose()),
    ("convex corner past convex corner", CUBE_MESH, pose([0.215, 0.215, 0.215]), CUBE_MESH, pose()),
    ("tetrahedron past box edge", TETRA, pose([0.0, 0.23, 0.28]), BOX, pose()),
    ("sphere past cylinder rim", CYLINDER, pose(), SMALL_SPHERE, pose([0.2 + 0.15, 0, 0.3 + 0.15])),
]


@pytest.mark.parametrize("case", NEAR_MISSES, ids=[c[0] for c in NEAR_MISSES])
def test_near_misses_give_nothing(case):
    name, sa, pa, sb, pb = case
    assert collide(world(sa, sb), [pa, pb]) == []
    assert collide(world(sa, sb), [pa, pb], margin=0.005) == []


def test_plane_and_sphere_in_the_link_frame():
    """Shape poses are in the link frame: a sphere 0.5 above its link origin, on a plane
    turned 90 degrees about x (its normal is world -y) at y = 1."""
    m = Model("m")
    m.add_link(Link("ball", 1.0, inertia=0.01 * np.eye(3),
                    collisions=[Shape("sphere", radius=0.3, pose=pose([0, 0, 0.5]))]))
    m.add_joint(Joint("free", "free", None, "ball"))
    ground = Model("ground")
    ground.add_link(Link("wall", collisions=[Shape("plane", pose=pose([0, 1, 0], [np.pi / 2, 0, 0]))]))
    ground.add_joint(Joint("weld", "fixed", None, "wall"))
    models = [m.finalize(), ground.finalize()]
    geoms = compile_geoms(models, compile_models(models))
    contacts = collide(geoms, [pose([0.2, 0.72, -0.5], [0, 0, 1.0]), pose()])
    check(contacts, [((0.2, 1.01, 0.0), (0, -1, 0), 0.02)], TOL_EXACT)
    assert contacts[0]["link_a"] == "ball" and contacts[0]["link_b"] == "wall"


def test_material_uses_the_smaller_friction_and_the_product_of_restitutions():
    a = Shape("sphere", radius=0.3, friction=0.4, restitution=0.5)
    b = Shape("box", size=[1, 1, 1], friction=0.9, restitution=0.6)
    contacts = collide(world(a, b), [pose([0, 0, 0.79]), pose()])
    assert len(contacts) == 1
    assert contacts[0]["mu"] == 0.4 and abs(contacts[0]["restitution"] - 0.3) < 1e-15


# --------------------------------------------------------------------- manifolds ---
def test_box_on_plane_and_on_a_bigger_box_stands_on_its_four_corners():
    for base in (PLANE, SLAB):
        top = 0.0 if base is PLANE else 0.1
        contacts = collide(world(BOX, base), [pose([0.3, -0.2, top + 0.099]), pose()])
        check(contacts, [(c + [0.3, -0.2, 0], Z, 0.001) for c in box_corners([0.3, 0.2], top - 0.0005)],
              TOL_EXACT)


def test_cylinder_upright_and_on_its_side():
    for base, top in ((PLANE, 0.0), (SLAB, 0.1)):
        upright = collide(world(CYLINDER, base), [pose([0.1, 0.2, top + 0.299]), pose()])
        check_rim(upright, np.array([0.1, 0.2]), 0.2, top - 0.0005, 0.001, TOL_EXACT)
        side = collide(world(CYLINDER, base), [pose([0.1, 0.2, top + 0.199], LYING), pose()])
        check(side, [((x, 0.2, top - 0.0005), Z, 0.001) for x in (-0.2, 0.4)], TOL_EXACT)


def test_capsule_lying_on_a_plane_touches_at_both_ends():
    contacts = collide(world(CAPSULE, PLANE), [pose([0, 0, 0.095], LYING), pose()])
    check(contacts, [((x, 0, -0.0025), Z, 0.005) for x in (-0.3, 0.3)], TOL_EXACT)


def test_convex_mesh_of_a_box_on_a_box_gets_its_four_bottom_vertices():
    # the mesh has extra vertices inside the cube and on its faces: the hull keeps the 8 corners
    extra = np.vstack([CUBE_VERTS, [[0, 0, 0], [0.05, 0.02, -0.01], [0.0, 0.0, 0.1]]])
    mesh = Shape("mesh", vertices=extra)
    geoms = world(mesh, SLAB)
    assert geoms.geoms.vert_count[0] == 8
    contacts = collide(geoms, [pose([0, 0, 0.199], [0, 0, 0.3]), pose()])
    R = Rotation.from_rotvec([0, 0, 0.3])
    check(contacts, [(R.apply(c) + [0, 0, 0.0995], Z, 0.001) for c in box_corners([0.1, 0.1], 0)], TOL_EXACT)


def test_many_mesh_vertices_under_a_plane_are_reduced_to_four_spread_points():
    """A 200-vertex sphere mesh pressed 5 cm into a plane (about 25 vertices under it): 4
    points, the deepest first, spread over the submerged cap."""
    k = np.arange(200) + 0.5
    polar, azimuth = np.arccos(1 - 2 * k / 200), np.pi * (1 + 5 ** 0.5) * k
    v = 0.2 * np.column_stack([np.cos(azimuth) * np.sin(polar), np.sin(azimuth) * np.sin(polar), np.cos(polar)])
    geoms = world(Shape("mesh", vertices=v), PLANE)
    assert geoms.geoms.vert_count[0] == 200
    contacts = collide(geoms, [pose([0, 0, 0.15]), pose()])
    assert len(contacts) == MAX_MANIFOLD
    depths = [c["depth"] for c in contacts]
    assert depths[0] == max(depths) and abs(depths[0] - (-0.15 - v[:, 2].min())) < TOL_EXACT
    pts = np.array([c["point"][:2] for c in contacts])
    submerged = v[v[:, 2] < -0.15, :2]
    assert len(submerged) > 8
    # the 4 points reach across the submerged cap: their spread is most of the cap's
    spread = max(np.linalg.norm(p - q) for p in pts for q in pts)
    cap = max(np.linalg.norm(p - q) for p in submerged for q in submerged)
    assert spread > 0.8 * cap


def test_tilted_box_edge_on_a_box_gives_the_edge_ends():
    """CUBE turned 10 degrees about y: its lower bottom edge 1 mm into SLAB: two points."""
    R = Rotation.from_rotvec([0, np.radians(10), 0])
    low = R.apply([0.1, 0, -0.1])            # turning about +y lowers the +x bottom edge
    height = 0.1 - low[2] - 0.001
    contacts = collide(world(CUBE, SLAB), [pose([0, 0, height], [0, np.radians(10), 0]), pose()])
    check(contacts, [((low[0], y, 0.0995), Z, 0.001) for y in (-0.1, 0.1)], TOL_EXACT)


# ----------------------------------------------------------------------- filters ---
def chain_model(self_collision):
    """base (free) - hinge1 - link1 - hinge2 - link2 - fixed - link3; a table welded to the
    world in the same model; every link carries a small box."""
    m = Model("robot")
    box = lambda: [Shape("box", size=[0.1, 0.1, 0.1])]
    for name in ("base", "link1", "link2", "link3", "table"):
        m.add_link(Link(name, 1.0, inertia=0.01 * np.eye(3), collisions=box()))
    m.add_joint(Joint("root", "free", None, "base"))
    m.add_joint(Joint("hinge1", "revolute", "base", "link1"))
    m.add_joint(Joint("hinge2", "revolute", "link1", "link2"))
    m.add_joint(Joint("weld", "fixed", "link2", "link3"))
    m.add_joint(Joint("table_weld", "fixed", None, "table"))
    m.self_collision = self_collision
    return m.finalize()


def pair_names(geoms):
    return {tuple(sorted((geoms.names[i].split("/")[0], geoms.names[j].split("/")[0])))
            for i, j in geoms.pairs}


def test_pairs_follow_the_tree_the_bodies_and_self_collision():
    m = chain_model(self_collision=True)
    geoms = compile_geoms([m], compile_models([m]))
    assert np.all(geoms.pairs[:, 0] < geoms.pairs[:, 1])
    # excluded: base-link1 and link1-link2 (parent and child), link2-link3 (one body through the
    # fixed joint), link1-link3 (link3 is on link2's body, whose parent link is link1)
    assert pair_names(geoms) == {("base", "link2"), ("base", "link3"), ("base", "table"),
                                 ("link1", "table"), ("link2", "table"), ("link3", "table")}
    m = chain_model(self_collision=False)
    geoms = compile_geoms([m], compile_models([m]))
    # moving links of one model do not meet; the world-welded table still meets them all
    assert pair_names(geoms) == {("base", "table"), ("link1", "table"), ("link2", "table"),
                                 ("link3", "table")}


def test_world_welded_geoms_never_pair_and_other_models_always_may():
    a, b = chain_model(False), free_body("ball", [Shape("sphere", radius=0.1)])
    ground = Model("ground")
    ground.add_link(Link("floor", collisions=[Shape("plane"), Shape("box", size=[1, 1, 1])]))
    ground.add_joint(Joint("weld", "fixed", None, "floor"))
    models = [a, b, ground.finalize()]
    geoms = compile_geoms(models, compile_models(models))
    names = pair_names(geoms)
    assert ("floor", "table") not in names and ("floor", "floor") not in names
    for link in ("base", "link1", "link2", "link3", "table"):
        assert tuple(sorted((link, "ball_link"))) in names
    assert ("ball_link", "floor") in names
    assert len(geoms.names) == 5 + 1 + 2 and geoms.names[-2:] == ["floor/0", "floor/1"]


def test_collision_families_need_both_masks():
    """Chrono's rule: a pair collides only if each one's mask has the other's family."""
    def families(fa, ma, fb, mb):
        a, b = free_body("a", [CUBE]), free_body("b", [CUBE])
        a.links[0].collision_family, a.links[0].collision_mask = fa, ma
        b.links[0].collision_family, b.links[0].collision_mask = fb, mb
        geoms = compile_geoms([a, b], compile_models([a, b]))
        return len(geoms.pairs)
    assert families(0, 0xFFFF, 0, 0xFFFF) == 1
    assert families(2, 0xFFFF & ~(1 << 3), 3, 0xFFFF) == 0     # a refuses b's family
    assert families(2, 0xFFFF, 3, 0xFFFF & ~(1 << 2)) == 0     # b refuses a's family
    assert families(2, 1 << 3, 3, 1 << 2) == 1                  # each accepts only the other


def test_a_mesh_that_could_not_be_read_is_skipped():
    lost = Shape("mesh", vertices=None, mesh_path="missing.stl")
    geoms = world(lost, SPHERE)
    assert geoms.names == ["body1_link/0"] and len(geoms.pairs) == 0


# ----------------------------------------------------------------- SR1 on the floor ---
@pytest.fixture(scope="module")
def sr1_world():
    robot = mb.load_model(MODELS + "SR1.wrl")
    floor = mb.load_model(MODELS + "floor.wrl")
    compiled = compile_models([robot, floor])
    geoms = compile_geoms([robot, floor], compiled)
    return robot, floor, compiled, geoms


def sr1_link_poses(robot, compiled, height):
    """Kinematics at the zero joint pose with the free root joint at this height."""
    from mbsim_ros.dynamics import kernels
    q = np.concatenate([robot.neutral_q(), np.zeros(compiled.nq - robot.nq)])
    q[robot.joints[0].q_index + 2] = height
    df, d = compiled.new_data()
    kernels.kinematics_kernel(compiled.tf, compiled.ti, df, q, np.zeros(compiled.nv))
    return d.link_R.copy(), d.link_p.copy()


def sole_corners(compiled, R, p, link):
    """World corners of the 0.25 x 0.14 x 0.01 foot box (at 0.055, 0, -0.05 in the ankle link)."""
    k = compiled.link_names.index(link)
    return [R[k] @ np.array([0.055 + x, y, -0.055]) + p[k] for x in (-0.125, 0.125) for y in (-0.07, 0.07)]


def test_sr1_stands_on_the_floor_on_eight_sole_corners(sr1_world):
    robot, floor, compiled, geoms = sr1_world
    assert robot.joints[0].type == "free"
    R, p = sr1_link_poses(robot, compiled, 0.0)
    sole = min(c[2] for c in sole_corners(compiled, R, p, "LLEG_ANKLE_R"))
    R, p = sr1_link_poses(robot, compiled, -sole - 1e-3)     # soles 1 mm under z = 0
    cf, ci, contacts = geoms.new_workspace()
    n = collision_pass.collide_kernel(geoms.gf, geoms.gi, cf, ci, R, p, 0.0)
    found = contacts_list(geoms, contacts, n)
    # the floor model comes second, so its geom has the larger index: the floor is geom b and
    # the normal points from the floor up into the feet
    assert len(found) == 8
    for c in found:
        assert c["link_b"] == "FLOOR" and c["link_a"] in ("LLEG_ANKLE_R", "RLEG_ANKLE_R")
    for foot in ("LLEG_ANKLE_R", "RLEG_ANKLE_R"):
        corners = sole_corners(compiled, R, p, foot)
        assert np.allclose([c[2] for c in corners], -1e-3, atol=1e-12)
        # each corner midway between the sole (z = -1 mm) and the floor (z = 0)
        check([c for c in found if c["link_a"] == foot],
              [(corner + [0, 0, 5e-4], Z, 1e-3) for corner in corners], TOL_EXACT)
    R, p = sr1_link_poses(robot, compiled, -sole + 1e-2)     # lifted 1 cm
    assert collision_pass.collide_kernel(geoms.gf, geoms.gi, cf, ci, R, p, 0.0) == 0


def test_collide_is_callable_from_numba_code():
    """The contact solver calls collide() on carved views inside its own kernel (a kernel: a
    plain njit function, with reference counting, must not take carved views, see kernel())."""
    from mbsim_ros._kernel_cache import kernel

    @kernel()
    def step_like(gf, gi, cf, ci, link_R, link_p):
        g, _, _ = carve_geoms(gf, gi)
        c, _, _ = carve_contacts(cf, ci)
        n = collision_pass.collide(g, c, link_R, link_p, 0.0)
        total = 0.0
        for r in range(n):
            total += c.depth[r]
        return n, total

    geoms = world(BOX, PLANE)
    cf, ci, _ = geoms.new_workspace()
    poses = [pose([0, 0, 0.099]), pose()]
    R = np.ascontiguousarray([T[:3, :3] for T in poses])
    p = np.ascontiguousarray([T[:3, 3] for T in poses])
    n, total = step_like(geoms.gf, geoms.gi, cf, ci, R, p)
    assert n == 4 and abs(total - 0.004) < 1e-15


# --------------------------------------------------------------------- capacity ---
def test_capacity_overflow_returns_the_capacity_and_stays_in_bounds():
    """Two boxes flat on a plane make 8 contacts; with room for 3 the pass stops at 3 and the
    rows it wrote are those of the full run (a write past the rows would land in the next
    field of the buffer, e.g. point[3] on normal[0], and change them)."""
    poses = [pose([0, 0, 0.099]), pose([1, 0, 0.099]), pose()]
    full_geoms = world(BOX, BOX, PLANE)
    full = collide(full_geoms, poses)
    assert len(full) == 8
    small = world(BOX, BOX, PLANE, capacity=3)
    cf, ci, contacts = small.new_workspace()
    R = np.ascontiguousarray([T[:3, :3] for T in poses])
    p = np.ascontiguousarray([T[:3, 3] for T in poses])
    assert collision_pass.collide_kernel(small.gf, small.gi, cf, ci, R, p, 0.0) == 3
    assert contacts.depth.shape == (3,)
    for got, want in zip(contacts_list(small, contacts, 3), full[:3]):
        for key in ("point", "normal"):
            assert np.array_equal(got[key], want[key])
        assert got["depth"] == want["depth"] and got["geom_a"] == want["geom_a"]
    # the capacity also holds across the kernel's manifold loop: zero room, zero rows
    none = world(BOX, PLANE, capacity=0)
    cf, ci, contacts = none.new_workspace()
    assert collision_pass.collide_kernel(none.gf, none.gi, cf, ci, R[[0, 2]], p[[0, 2]], 0.0) == 0


def test_a_fixed_base_meets_none_of_its_own_links():
    """solo12 welded at the origin: its base overlaps its upper legs (grandchildren, through the
    shoulders). Without self-collision the model's links meet neither each other nor the base
    they hang from, as in Gazebo (self_collide off): no pair, no contact. With self-collision on,
    those overlaps are contacts again (MuJoCo filters only parent and child)."""
    from conftest import example_robot
    m = mb.load_model(example_robot("solo_description", "robots", "solo12.urdf"), floating_base=False)
    assert m.joints[0].type == "fixed" and not m.self_collision
    geoms = compile_geoms([m], compile_models([m]))
    assert len(geoms.pairs) == 0
    sim = mb.Simulation(m, dt=0.001)
    sim.step()
    assert sim.contacts() == []
    m.self_collision = True
    geoms = compile_geoms([m], compile_models([m]))
    names = pair_names(geoms)
    assert ("FL_UPPER_LEG", "base_link") in names and ("FL_SHOULDER", "base_link") not in names
