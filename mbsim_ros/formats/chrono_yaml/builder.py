"""The Model from a Chrono model document: the top level; the parts come from the mixins."""
from __future__ import annotations

import os

from ...model import Model
from .bodies import BodyReading
from .elements import ElementReading
from .joints import JointReading
from .parts import Body, CHRONO_GRAVITY, Edge, KNOWN_MODEL_KEYS


class Builder(BodyReading, JointReading, ElementReading):
    """One model document read into a Model: bodies, then joints and motors (the tree and the
    loops), then constraints, spring-dampers and loads."""

    def __init__(self, reader, doc):
        self.r = reader
        self.doc = doc
        self.bodies: dict[str, Body] = {}
        self.edges: list[Edge] = []

    # -- top level ---------------------------------------------------------------------
    def build(self) -> Model:
        r = self.r
        m = r.mapping(self.doc["model"], "model")
        r.degrees = r.flag(m, "angle_degrees", "model", True)
        name = r.text(m, "name", "model", "") or os.path.splitext(os.path.basename(r.name))[0]
        model = Model(name, gravity=CHRONO_GRAVITY)
        model.self_collision = True
        self.model = model
        for key in m:
            if key not in KNOWN_MODEL_KEYS:
                what = ("finite-element content" if "FEA" in str(key).upper() else "not a Chrono MBS model key")
                r.warn(f"model.{key}", f"{what}; not simulated, left out")
                model.report.append(("left out", str(key), f"{what}: not simulated"))
        self.data_root = self._data_root(m)
        if not m.get("bodies"):
            others = [k for k in m if k not in ("name", "angle_degrees", "data_path")]
            raise r.error("model.bodies", "no bodies: this file has no multibody content"
                          + (f" (it holds {', '.join(map(str, others))}, which this project does not simulate)"
                             if others else ""))
        for k, b in enumerate(r.sequence(m, "bodies", "model")):
            self._read_body(b, f"model.bodies[{k}]")
        for k, j in enumerate(r.sequence(m, "joints", "model")):
            self._read_joint(j, f"model.joints[{k}]")
        motors = [self._read_motor(x, f"model.motors[{k}]") for k, x in enumerate(r.sequence(m, "motors", "model"))]
        self._build_tree()
        for k, c in enumerate(r.sequence(m, "constraints", "model")):
            self._read_constraint(c, f"model.constraints[{k}]")
        for k, t in enumerate(r.sequence(m, "tsdas", "model")):
            self._read_tsda(t, f"model.tsdas[{k}]")
        for k, t in enumerate(r.sequence(m, "rsdas", "model")):
            self._read_rsda(t, f"model.rsdas[{k}]")
        for k, ld in enumerate(r.sequence(m, "body_loads", "model")):
            self._read_load(ld, f"model.body_loads[{k}]", controller=False)
        for k, ld in enumerate(r.sequence(m, "load_controllers", "model")):
            self._read_load(ld, f"model.load_controllers[{k}]", controller=True)
        model.motors.extend(mo for mo in motors if mo is not None)
        return model.finalize()

    def _data_root(self, m):
        r = self.r
        dp = m.get("data_path")
        if dp is None:
            return None
        dp = r.mapping(dp, "model.data_path")
        kind = r.enum(dp, "type", "model.data_path", ("ABSOLUTE", "RELATIVE"), "ABSOLUTE")
        if kind == "ABSOLUTE":
            return None
        return os.path.normpath(os.path.join(r.folder, r.text(dp, "root", "model.data_path", ".")))

    def _named(self, d, key, where):
        name = self.r.text(d, key, where)
        if name not in self.bodies:
            raise self.r.error(f"{where}.{key}", f"{name!r} is not a body of this model "
                                                 f"(bodies: {', '.join(self.bodies)})")
        return name
