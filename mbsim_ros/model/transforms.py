"""Small rigid-transform helpers shared by the loaders and exporters (plain numpy, not hot).

Loaders call them per element, so the 3x3 entries are computed on Python floats: the same IEEE
arithmetic as on numpy scalars, several times faster."""
from math import sqrt

import numpy as np


def rpy_to_matrix(rpy):
    """URDF fixed-axis roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = (float(a) for a in rpy)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def matrix_to_rpy(R):
    """Inverse of rpy_to_matrix (pitch in [-pi/2, pi/2])."""
    R = np.asarray(R, dtype=float)
    pitch = np.arctan2(-R[2, 0], np.hypot(R[0, 0], R[1, 0]))
    if np.hypot(R[0, 0], R[1, 0]) < 1e-12:   # gimbal lock: put everything in yaw
        return np.array([0.0, pitch, np.arctan2(-R[0, 1], R[1, 1])])
    return np.array([np.arctan2(R[2, 1], R[2, 2]), pitch, np.arctan2(R[1, 0], R[0, 0])])


def axis_angle_to_matrix(axis, angle):
    """Rodrigues' formula; `axis` must be a unit vector."""
    return np.array(axis_angle_rows(axis, angle))


def axis_angle_rows(axis, angle):
    """axis_angle_to_matrix's rows as lists of floats (to build a larger array in one go)."""
    x, y, z = np.asarray(axis, dtype=float).tolist()
    c, s = float(np.cos(angle)), float(np.sin(angle))
    C = 1.0 - c
    return [
        [c + x * x * C, x * y * C - z * s, x * z * C + y * s],
        [y * x * C + z * s, c + y * y * C, y * z * C - x * s],
        [z * x * C - y * s, z * y * C + x * s, c + z * z * C],
    ]


def quat_to_matrix(q):
    """Quaternion (x, y, z, w) -> rotation matrix."""
    return np.array(quat_rows(q))


def quat_rows(q):
    """quat_to_matrix's rows as lists of floats (to build a larger array in one go)."""
    x, y, z, w = q.tolist() if isinstance(q, np.ndarray) else map(float, q)
    n = sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / n, y / n, z / n, w / n              # (q / n, without an array)
    return [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]


def quats_to_matrices(q):
    """(n, 4) quaternions (x, y, z, w), not zero, -> (n, 3, 3) rotation matrices: quat_to_matrix
    over many at once."""
    q = np.asarray(q, dtype=float)
    x, y, z, w = (q / np.sqrt((q * q).sum(axis=1))[:, None]).T
    R = np.empty((len(q), 3, 3))
    R[:, 0, 0] = 1 - 2 * (y * y + z * z)
    R[:, 0, 1] = 2 * (x * y - z * w)
    R[:, 0, 2] = 2 * (x * z + y * w)
    R[:, 1, 0] = 2 * (x * y + z * w)
    R[:, 1, 1] = 1 - 2 * (x * x + z * z)
    R[:, 1, 2] = 2 * (y * z - x * w)
    R[:, 2, 0] = 2 * (x * z - y * w)
    R[:, 2, 1] = 2 * (y * z + x * w)
    R[:, 2, 2] = 1 - 2 * (x * x + y * y)
    return R


def matrix_to_quat(R):
    """Rotation matrix -> quaternion (x, y, z, w) with w >= 0."""
    R = np.asarray(R, dtype=float)
    t = np.trace(R)
    if t > 0:
        s = 2.0 * np.sqrt(t + 1.0)
        q = np.array([(R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, 0.25 * s])
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
        q = np.zeros(4)
        q[i] = 0.25 * s
        q[j] = (R[j, i] + R[i, j]) / s
        q[k] = (R[k, i] + R[i, k]) / s
        q[3] = (R[k, j] - R[j, k]) / s
    if q[3] < 0:
        q = -q
    return q / np.linalg.norm(q)


def make_transform(R=None, p=None):
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = R
    if p is not None:
        T[:3, 3] = p
    return T


def inverse_transform(T):
    R, p = T[:3, :3], T[:3, 3]
    return make_transform(R.T, -R.T @ p)
