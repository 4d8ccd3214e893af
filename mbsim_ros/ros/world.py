"""The world a run simulates: the configured model files (or the bundled SR1 world), loaded,
with joints held at their initial pose when asked. Light: no ROS libraries."""
from __future__ import annotations

import os
import warnings


DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "models")
DEFAULT_WORLD = [os.path.join(DATA, "SR1_range.wrl"), os.path.join(DATA, "floor.wrl")]


def model_paths(config):
    """The model files a configuration names (comma-separated), or the bundled world."""
    text = config.get("model") or ""
    paths = [p.strip() for p in text.split(",") if p.strip()] if isinstance(text, str) else list(text)
    return paths or DEFAULT_WORLD


def load_models(paths, floating_base=False):
    """(models, notes): the model files loaded, their loaders' warnings as notes to print."""
    from ..formats import load_model
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        models = [load_model(p, floating_base=floating_base) for p in paths]
    return models, [str(w.message) for w in caught]


def load_world(config):
    """(models, notes): the configured models, with joints held by springs when hold > 0."""
    models, notes = load_models(model_paths(config), config["floating_base"])
    if config["hold"] > 0:
        hold_initial_pose(models, config["hold"])
    return models, notes


def hold_initial_pose(models, stiffness):
    """Hold every one-coordinate joint at its initial angle with a stiff implicit spring and a
    damper (critically damped for a unit inertia): a stand-in for a controller, stable at any dt."""
    import numpy as np
    for model in models:
        for joint in model.joints:
            if joint.type not in ("fixed", "ball", "free"):
                joint.stiffness = np.full(joint.nv, stiffness)
                joint.damping = np.maximum(joint.damping, 2.0 * np.sqrt(stiffness))
                joint.rest_position = np.array(joint.q0, dtype=float)
        model.finalize()
