"""Our SDF model against DART's own SDF parser (dartpy.utils.SdfParser): the same state in
both, then mass matrices, Coriolis + gravity forces and link poses side by side.

Where DART's parser departs from SDFormat, the pairing adapts DART (never our model): its
free joints start at the link pose (set to identity here: ours carry the pose in q) and their
velocities are world-aligned (ours are in the child frame: v_dart = diag(R, R) v_ours). DART's
parser ignores <static> and joints to the world, floating those links: their DART DOFs are
held at our pose with zero velocity and left out (with zero base velocity and acceleration,
the other DOFs' mass matrix entries and bias forces are those of the welded base)."""
import os

import numpy as np

from mbsim_ros.model.transforms import make_transform, quat_to_matrix


def dart_skeletons(path):
    import dartpy
    uri = "file://" + os.path.abspath(path)
    if "<world" in open(path).read():
        world = dartpy.utils.SdfParser.readWorld(uri)
        return [world.getSkeleton(i) for i in range(world.getNumSkeletons())]
    return [dartpy.utils.SdfParser.readSkeleton(uri)]


class Pairing:
    """Our joints matched to DART's by their child link (a world's skeletons side by side, a
    link called "<skeleton>::<body>" in ours when the bare name was taken), with the DOF
    permutation between them."""

    def __init__(self, model, skeletons):
        import dartpy
        self.model, self.skels = model, list(skeletons)
        self.body = {}          # our link name -> DART body node
        for s in self.skels:
            for i in range(s.getNumBodyNodes()):
                b = s.getBodyNode(i)
                for name in (s.getName() + "::" + b.getName(), b.getName()):
                    if name in {l.name for l in model.links} and name not in self.body:
                        self.body[name] = b
                        break
        missing = [l.name for l in model.links if l.name not in self.body]
        assert not missing, f"links DART does not have: {missing}"
        self.offset = np.cumsum([0] + [s.getNumDofs() for s in self.skels])
        self.perm = np.full(self.offset[-1], -1)     # our DOF index of each DART DOF (-1: held)
        self.held = []                                # (DART free joint, our welded link)
        for j in model.joints:
            b = self.body[j.child]
            dj, base = b.getParentJoint(), self.offset[self.skels.index(b.getSkeleton())]
            if j.type == "fixed" and j.parent is None and dj.getType() == "FreeJoint":
                dj.setTransformFromParentBodyNode(dartpy.math.Isometry3())
                self.held.append((dj, j.child))
                continue
            if j.type == "free":
                dj.setTransformFromParentBodyNode(dartpy.math.Isometry3())
                order = [3, 4, 5, 0, 1, 2]          # DART: angular then linear; ours: linear then angular
            else:
                order = list(range(j.nv))
            for k in range(j.nv):
                self.perm[base + dj.getIndexInSkeleton(k)] = j.v_index + order[k]
        self.kept = self.perm >= 0
        assert sorted(self.perm[self.kept]) == list(range(model.nv)), "DOFs do not pair up"

    def joint(self, joint):
        return self.body[joint.child].getParentJoint()

    def set_state(self, q, v):
        """q, v ours; P and dP/dt v map our velocities to DART's (free joints)."""
        import dartpy
        nv = self.model.nv
        self.P, self.Pdot_v = np.eye(nv), np.zeros(nv)
        for j in self.model.joints:
            dj = self.joint(j)
            qj = q[j.q_index:j.q_index + j.nq]
            if j.type == "free":
                T = make_transform(quat_to_matrix(qj[3:]), qj[:3])
                dj.setPositions(dartpy.dynamics.FreeJoint.convertToPositions(dartpy.math.Isometry3(T)))
                R, i = T[:3, :3], j.v_index
                self.P[i:i + 3, i:i + 3] = self.P[i + 3:i + 6, i + 3:i + 6] = R
                self.Pdot_v[i:i + 3] = R @ np.cross(v[i + 3:i + 6], v[i:i + 3])
            elif j.type == "ball":
                dj.setPositions(dartpy.dynamics.BallJoint.convertToPositions(quat_to_matrix(qj)))
            elif j.nq:
                dj.setPositions(qj)
        import mbsim_ros as mb
        T = mb.link_transforms(self.model, q)
        for dj, link in self.held:
            dj.setPositions(dartpy.dynamics.FreeJoint.convertToPositions(dartpy.math.Isometry3(T[link])))
        vd = np.zeros(len(self.perm))
        vd[self.kept] = (self.P @ v)[self.perm[self.kept]]
        for k, s in enumerate(self.skels):
            s.setVelocities(vd[self.offset[k]:self.offset[k + 1]])

    def _dart_mass(self):
        Md = np.zeros((self.model.nv, self.model.nv))
        for k, s in enumerate(self.skels):
            idx = self.perm[self.offset[k]:self.offset[k + 1]]
            keep = idx >= 0
            Md[np.ix_(idx[keep], idx[keep])] = s.getMassMatrix()[np.ix_(keep, keep)]
        return Md

    def mass_matrix(self):
        """DART's mass matrix in our coordinates."""
        return self.P.T @ self._dart_mass() @ self.P

    def bias(self):
        """DART's Coriolis and gravity forces in our coordinates."""
        b = np.zeros(self.model.nv)
        for k, s in enumerate(self.skels):
            idx = self.perm[self.offset[k]:self.offset[k + 1]]
            b[idx[idx >= 0]] = s.getCoriolisAndGravityForces()[idx >= 0]
        return self.P.T @ (b + self._dart_mass() @ self.Pdot_v)

    def link_pose(self, link):
        return self.body[link].getWorldTransform().matrix()


def random_state(model, rng):
    q = model.initial_q().copy()
    for j in model.joints:
        if j.type in ("ball", "free"):
            quat = rng.normal(size=4)
            q[j.q_index + j.nq - 4:j.q_index + j.nq] = quat / np.linalg.norm(quat)
            if j.type == "free":
                q[j.q_index:j.q_index + 3] += rng.uniform(-1, 1, 3)
        else:
            q[j.q_index:j.q_index + j.nq] = rng.uniform(-1.2, 1.2, j.nq)
    return q, rng.uniform(-2, 2, model.nv)


def compare(model, skeletons, states=20, seed=0):
    """Largest relative differences (mass matrix, bias forces) and largest link pose difference
    over random states; DART's gravity used on our side (its parser keeps its own default)."""
    import mbsim_ros as mb
    model.gravity = np.asarray(skeletons[0].getGravity(), float)
    model.finalize()
    pairing = Pairing(model, skeletons)
    rng = np.random.default_rng(seed)
    worst = np.zeros(3)
    for _ in range(states):
        q, v = random_state(model, rng)
        pairing.set_state(q, v)
        M, Md = mb.mass_matrix(model, q), pairing.mass_matrix()
        b, bd = mb.inverse_dynamics(model, q, v, np.zeros(model.nv)), pairing.bias()
        T = mb.link_transforms(model, q)
        pose = max(np.abs(T[l.name] - pairing.link_pose(l.name)).max() for l in model.links)
        worst = np.maximum(worst, [np.abs(M - Md).max() / max(np.abs(Md).max(), 1e-300),
                                   np.abs(b - bd).max() / max(np.abs(bd).max(), np.abs(Md).max(), 1e-300), pose])
    return worst
