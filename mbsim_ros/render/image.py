"""Image output: PNG (zlib + struct, no imaging library), JPEG through matplotlib (Pillow), and a
grey-scale view of a depth image."""
import os
import struct
import zlib

import numpy as np


def write_png(path, image):
    """Write an 8-bit PNG: image (H, W, 3) uint8 RGB or (H, W) uint8 grey. Returns path."""
    a = np.asarray(image)
    if a.dtype != np.uint8 or not (a.ndim == 2 or (a.ndim == 3 and a.shape[2] == 3)):
        raise ValueError(f"write_png: expected (H, W) or (H, W, 3) uint8, got {a.shape} {a.dtype}")
    h, w = a.shape[:2]
    if h == 0 or w == 0:
        raise ValueError("write_png: empty image")
    color_type = 2 if a.ndim == 3 else 0
    rows = np.ascontiguousarray(a).reshape(h, -1)
    raw = np.zeros((h, rows.shape[1] + 1), np.uint8)       # filter byte 0 (None) per row
    raw[:, 1:] = rows

    def chunk(tag, data):
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

    png = (b"\x89PNG\r\n\x1a\n"
           + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw.tobytes(), 6))
           + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(png)
    return path


JPEG = (".jpg", ".jpeg")


def write_image(path, image):
    """Write image (as write_png takes it) as PNG or JPEG, by the file's extension. ValueError for
    another extension. Returns path."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext == ".png":
        return write_png(path, image)
    if ext not in JPEG:
        raise ValueError(f"{path}: expected a file ending in .png, {', '.join(JPEG)}")
    from matplotlib.image import imsave          # writes JPEG through Pillow, matplotlib's own dependency
    a = np.asarray(image)
    imsave(path, a, format="jpeg", pil_kwargs={"quality": 95},
           **({"cmap": "gray", "vmin": 0, "vmax": 255} if a.ndim == 2 else {}))
    return path


def depth_to_image(depth, near=None):
    """(H, W) uint8 grey view of a depth image: 255 * near / d, so the nearest surface (or
    `near`) is white, grey falls off with distance and +inf (nothing) is black."""
    d = np.asarray(depth, float)
    finite = np.isfinite(d) & (d > 0)
    if not finite.any():
        return np.zeros(d.shape, np.uint8)
    ref = float(near) if near is not None else float(d[finite].min())
    out = np.zeros(d.shape)
    out[finite] = 255.0 * ref / d[finite]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)
