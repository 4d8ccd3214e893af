"""The mass properties MuJoCo gives bodies, for all geoms and bodies of a model at once.

A geom's mass is `mass` when given, else `density` (1000) times its volume; its inertia about its
centre is that of a solid of uniform density (primitives by formula, meshes by their enclosed
volume, mesh_mass_properties); geoms outside the compiler's inertiagrouprange and planes give
none. A body's mass properties are its <inertial>, else (inertiafromgeom) the sum of its geoms'
about their joint centre; then MuJoCo's boundmass, boundinertia and balanceinertia.
"""
from __future__ import annotations

from math import pi

import numpy as np

from ...model.transforms import quats_to_matrices
from .geoms import hull_faces
from .parse import EYE3, EYE4

_NO_TURN = (0.0, 0.0, 0.0, 1.0)       # (x, y, z, w)
_ORIGIN = (0.0, 0.0, 0.0)


def geom_poses(geoms):
    """(n, 4, 4): each geom's pose in its body's frame (a frame's pose T, then pos and its
    orientation: quaternions turned into matrices all at once)."""
    n = len(geoms)
    quats, positions = [], []
    for g in geoms:
        q = g.quat
        quats.append(_NO_TURN if q is None else (q[1], q[2], q[3], q[0]))
        positions.append(_ORIGIN if g.pos is None else g.pos)
    poses = np.zeros((n, 4, 4))
    poses[:, :3, :3] = quats_to_matrices(quats)
    poses[:, :3, 3] = positions
    poses[:, 3, 3] = 1.0
    for i, g in enumerate(geoms):
        if g.rows is not None:
            poses[i, :3, :3] = g.rows
        if g.T is not EYE4:
            poses[i] = g.T @ poses[i]
    return poses


def geom_masses(r, geoms, poses):
    """(mass (n,), centre (n, 3), inertia about it (n, 3, 3)) of each geom in its body's frame;
    zeros for the geoms that give no mass. The turn of each inertia into the body frame is done
    for all geoms at once."""
    n = len(geoms)
    mass, com, inertia = np.zeros(n), poses[:, :3, 3].copy(), np.zeros((n, 3, 3))
    rows, masses, units = [], [], []
    for i, g in enumerate(geoms):
        if not g.inertial:
            continue
        if g.kind == "mesh":
            volume, centre, unit = _mesh_properties(r, g)
            com[i] = poses[i, :3, :3] @ centre + poses[i, :3, 3]
        else:
            volume, unit = _primitive(g.kind, g.size)
        m = g.density * volume if g.mass is None else g.mass
        per_volume = m / volume if volume > 0 else 0.0
        rows.append(i)
        masses.append(m)
        units.append(unit * per_volume if g.kind == "mesh" else
                     [[unit[0] * per_volume, 0.0, 0.0], [0.0, unit[1] * per_volume, 0.0], [0.0, 0.0, unit[2] * per_volume]])
    if rows:
        R = poses[rows, :3, :3]
        with np.errstate(invalid="ignore", over="ignore"):     # (huge sizes: Link refuses the inf, by name)
            inertia[rows] = R @ np.array(units) @ R.transpose(0, 2, 1)
        mass[rows] = masses
    return mass, com, inertia


def _primitive(kind, s):
    """(volume, principal inertias about the centre at density 1) of a sphere, capsule, cylinder,
    ellipsoid or box of sizes s, as MuJoCo computes them (products, not powers: a huge size
    gives inf, not an OverflowError)."""
    a, b, c = s
    if kind == "sphere":
        v = 4 / 3 * pi * a * a * a
        return v, (0.4 * v * a * a,) * 3
    if kind == "capsule":
        h = 2 * b
        ms = 4 / 3 * pi * a * a * a          # the two hemispheres
        v = pi * a * a * h + ms
        mc = v - ms
        ixx = mc * (3 * a * a + h * h) / 12 + 0.4 * ms * a * a + ms * h * (3 * a + 2 * h) / 8
        return v, (ixx, ixx, mc * a * a / 2 + 0.4 * ms * a * a)
    if kind == "cylinder":
        h = 2 * b
        v = pi * a * a * h
        ixx = v * (3 * a * a + h * h) / 12
        return v, (ixx, ixx, v * a * a / 2)
    v, d = (4 / 3 * pi * a * b * c, 5) if kind == "ellipsoid" else (8 * a * b * c, 3)
    return v, (v * (b * b + c * c) / d, v * (a * a + c * c) / d, v * (a * a + b * b) / d)


def _mesh_properties(r, g):
    """A mesh geom's (volume, centroid, inertia at density 1), once per mesh asset."""
    mesh = g.mesh
    if mesh.mass_properties is None:
        mesh.mass_properties = mesh_mass_properties(r, g.node, mesh)
    return mesh.mass_properties


def body_masses(r, bodies, geoms, mass, com, inertia):
    """(mass (nb,), centre (nb, 3), inertia about it (nb, 3, 3)) of each body in its frame, from
    bodies [(node, its <inertial> node or None)] and the geoms' own (geom_masses; Geom.body:
    the body's index, -1 for the world's)."""
    nb = len(bodies)
    mode = r.compiler.inertiafromgeom
    own = [i for i, g in enumerate(geoms) if g.body >= 0]
    body = np.array([geoms[i].body for i in own], dtype=int)
    m, c, I = mass[own], com[own], inertia[own]
    M = np.bincount(body, weights=m, minlength=nb)
    with np.errstate(all="ignore"):
        C = np.stack([np.bincount(body, weights=m * c[:, k], minlength=nb) for k in range(3)], axis=1)
        C = np.divide(C, M[:, None], out=np.zeros((nb, 3)), where=M[:, None] > 0)
        d = c - C[body]
        terms = I + m[:, None, None] * ((d * d).sum(axis=1)[:, None, None] * EYE3 - d[:, :, None] * d[:, None, :])
    J = np.zeros((nb, 3, 3))
    np.add.at(J, body, terms)
    for b, (node, inertial) in enumerate(bodies):
        if inertial is not None and mode != "true":
            M[b], C[b], J[b] = _inertial(r, inertial)
        elif mode == "false" or not M[b] > 0:
            M[b], C[b], J[b] = 0.0, 0.0, 0.0
    cc = r.compiler
    if cc.boundmass > 0 or cc.boundinertia > 0 or cc.balanceinertia:
        for b in range(nb):
            M[b] = max(M[b], cc.boundmass)
            w, U = np.linalg.eigh(0.5 * (J[b] + J[b].T))
            w = np.maximum(w, cc.boundinertia)
            if cc.balanceinertia and (w[0] + w[1] < w[2] or w[0] + w[2] < w[1] or w[1] + w[2] < w[0]):
                w[:] = w.mean()
            J[b] = U @ np.diag(w) @ U.T
    return M, C, J


def _inertial(r, n):
    """(mass, centre, inertia) of an <inertial>."""
    a = n.attrib
    m = r.number(n, a, "mass")
    R = r.rotation(n, a)
    if "fullinertia" in a:
        xx, yy, zz, xy, xz, yz = r.floats(n, a, "fullinertia", 6)
        I = R @ np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]) @ R.T
    else:
        I = R @ np.diag(r.floats(n, a, "diaginertia", 3)) @ R.T
    com = r.floats(n, a, "pos", 3)
    if m < 0:
        raise r.error(n, f"mass {m:g}: expected >= 0")
    return m, com, I


def mesh_mass_properties(r, node, mesh):
    """Volume, centroid and inertia about it (density 1) of a mesh as MuJoCo computes them
    (user_mesh.cc): pyramids from the area-weighted face centroid give the volume and centroid,
    tetrahedra from the centroid the inertia. inertia="legacy" (MuJoCo's default) takes every
    pyramid's volume as positive, "exact" keeps its sign, "convex" uses the convex hull."""
    vertices, faces = mesh.vertices, mesh.faces
    if mesh.inertia == "convex":
        faces = hull_faces(r, node, vertices)
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    n = np.cross(b - a, c - a)
    length = np.linalg.norm(n, axis=1)
    area = np.where(length < 1e-15, 0.0, length / 2)
    unit = n / np.where(length < 1e-15, 1.0, length)[:, None]
    centre = (a + b + c) / 3
    if area.sum() < 1e-15:
        raise r.error(node, f"mesh \"{mesh.name}\" has no surface area")
    facecen = (area[:, None] * centre).sum(axis=0) / area.sum()
    vol = np.einsum("ij,ij->i", centre - facecen, unit) * area / 3
    if mesh.inertia == "legacy":
        vol = np.abs(vol)
    volume = vol.sum()
    if volume < 1e-15:
        raise r.error(node, f"mesh \"{mesh.name}\" encloses no volume ({volume:.3g} m^3; MuJoCo refuses it too)")
    com = (vol[:, None] * (0.75 * centre + 0.25 * facecen)).sum(axis=0) / volume
    D, E, F = a - com, b - com, c - com
    vol = np.einsum("ij,ij->i", (D + E + F) / 3, unit) * area / 3
    if mesh.inertia == "legacy":
        vol = np.abs(vol)
    P = np.zeros((3, 3))
    for i in range(3):
        for j in range(i, 3):
            P[i, j] = P[j, i] = (vol / 20 * (2 * (D[:, i] * D[:, j] + E[:, i] * E[:, j] + F[:, i] * F[:, j])
                                             + D[:, i] * E[:, j] + D[:, j] * E[:, i] + D[:, i] * F[:, j]
                                             + D[:, j] * F[:, i] + E[:, i] * F[:, j] + E[:, j] * F[:, i])).sum()
    inertia = np.trace(P) * EYE3.copy() - P
    return vol.sum(), com, inertia


