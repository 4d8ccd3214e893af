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


Y_UP_FORMATS = (".osim",)      # model files whose world is y up (z_up turns them)


def load_models(paths, floating_base=False, z_up=False):
    """(models, notes): the model files loaded, their loaders' warnings as notes to print (each
    once). z_up=True turns y-up models (OpenSim) so that their +y is the world's +z; a note when
    none of the files is one."""
    from ..formats import load_model
    turned = [os.fspath(p).lower().endswith(Y_UP_FORMATS) for p in paths] if z_up else [False] * len(paths)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        models = [load_model(p, floating_base=floating_base, **({"z_up": True} if t else {}))
                  for p, t in zip(paths, turned)]
    notes = list(dict.fromkeys(str(w.message) for w in caught))
    if z_up and not any(turned):
        notes.append(f"z_up: no y-up model ({', '.join(Y_UP_FORMATS)}) to turn; the models are z up already")
    return models, notes


def load_world(config):
    """(models, notes): the configured models, with joints held by springs when hold > 0 (not
    those with actuators or motors: springs would fight them);
    config's dt, duration and contact filled in from the models' settings (apply_model_settings)."""
    models, notes = load_models(model_paths(config), config["floating_base"], config.get("z_up", False))
    if config["hold"] > 0:
        driven = [m for m in models if m.actuators or m.motors]
        hold_initial_pose([m for m in models if m not in driven], config["hold"])
        notes += [f"{m.name}: joints not held (it has actuators or motors of its own)" for m in driven]
    return models, notes + apply_model_settings(config, models)


DEFAULT_DT = 0.001


def apply_model_settings(config, models):
    """Fill config's dt, duration and contact where the configuration leaves them open (None,
    "") from the first model that says (Model.settings time_step and end_time, as Chrono YAML
    files carry them; Model.contact_method); dt falls back to DEFAULT_DT, contact to lcp, duration
    stays None (the caller's default). A value the user gave wins. Returns notes saying which
    value is used wherever a model has one."""
    def setting(name):
        return lambda m: (getattr(m, "settings", None) or {}).get(name)
    notes = []
    for key, what, get in (("dt", "time_step", setting("time_step")), ("duration", "end_time", setting("end_time")),
                           ("contact", "contact method", lambda m: getattr(m, "contact_method", None))):
        found = next(((m.name, get(m)) for m in models if get(m)), None)
        if found is None:
            continue
        name, value = found
        unit = "" if key == "contact" else " s"
        if config[key] in (None, ""):
            config[key] = value if key == "contact" else float(value)
            notes.append(f"{key} {config[key]}{unit}: model {name}'s {what}")
        else:
            notes.append(f"{key} {config[key]}{unit} as given (model {name}'s {what} {value}{unit} not used)")
    if config["dt"] is None:
        config["dt"] = DEFAULT_DT
    if not config["contact"]:
        config["contact"] = "lcp"
    return notes


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
