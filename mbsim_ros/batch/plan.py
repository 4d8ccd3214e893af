"""Which scenarios of a batch run together in one mb.BatchSimulation (batched.py) and which one by
one through a Harness (scenario.py): decided here, before anything runs.

A batch's scenarios can run batched when they need nothing only a Harness gives:
- no controller (its code drives a Harness) and no bags kept (a bag is a Session's listener);
- only built-in metrics that read the state: imu_rms reads sensor readings, which a batch does
  not simulate, and a function metric may read them (nothing shows it does not);
- schedules are fine: batched.py applies their inputs as the Harness does.
Among those, scenarios whose parameters are equal apart from the initial state
(joint.<j>.q0, model.<m>.x|y|z|roll|pitch|yaw), the noise seed and sensor noise (these change
only the readings, which no metric then reads) share one model and form a group; a group of two
or more runs batched, split into chunks (one task each) so that every worker thread gets one.
Where a chunk runs, each world is built as a Harness builds it and checked bit for bit against
the chunk's model (BatchSimulation.set_world): one that differs after all (a locked joint
holds its q0, a world put on the ground moved its weld) runs one by one there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

READS_READINGS = ("imu_rms",)            # built-in metrics that read sensor readings
MAX_CHUNK_RECORD = 512 * 2 ** 20        # bytes of recorded signals a chunk may hold (its worlds' q, v, tau, ...)
BATCH_MARK = " batch of "               # in the worker column of a row stepped in a BatchSimulation


@dataclass
class Plan:
    chunks: list = field(default_factory=list)     # [[scenario, ...]]: one BatchSimulation each
    single: list = field(default_factory=list)     # scenarios run one by one
    reason: str | None = None                      # why none runs batched (None: the batch may)

    @property
    def batched(self):
        return sum(len(c) for c in self.chunks)


def ran_batched(row) -> bool:
    """Whether a result row's scenario was stepped in a BatchSimulation (its worker column says)."""
    return BATCH_MARK in (row.get("worker") or "")


def batched_line(batched, total, why=None):
    """The command's line on how the scenarios ran (why: plan's reason none could be batched)."""
    line = f"batched: {batched} of {total} scenarios ran as the worlds of BatchSimulations"
    if batched == total:
        return line + (" (worlds of one model stepped together)" if total else "")
    alone = "each on its own" if batched == 0 else f"{total - batched} each on its own"
    return f"{line}; {alone} ({why or 'no other scenario with their model, or not the model of their group'})"


def reason(spec, bags="none", batched=True):
    """Why no scenario of `spec` can run batched, or None."""
    if not batched:
        return "--no-batched"
    if bags != "none":
        return f"bags are kept (--bags {bags})"
    if spec.controller or any(a.name == "controller" for a in spec.axes):
        return "a controller drives them"
    for name, m in spec.metrics.items():
        if m["function"]:
            return f"metric {name} is a function, which may read sensor readings"
        if m["metric"] in READS_READINGS:
            return f"metric {name} reads sensor readings"
    return None


def _state_only(name):
    parts = name.split(".")
    return (parts[0] == "joint" and parts[-1] == "q0") or parts[0] == "model"


def _readings_only(name):
    return name.split(".")[0] == "sensor"


def model_key(params):
    """What tells one scenario's model from another's: its parameters but the initial state and
    sensor noise (sorted (name, value) pairs)."""
    return tuple(sorted((k, v) for k, v in params.items() if not (_state_only(k) or _readings_only(k))))


def record_bytes(spec):
    """Bytes a world's recorded signals take for the spec's duration (t, q, v, tau, contact force)."""
    nq = sum(m.nq for m in spec.models)
    nv = sum(m.nv for m in spec.models)
    steps = int(round(spec.duration / (spec.config.dt or 0.001))) + 1
    return steps * (nq + 2 * nv + 2) * 8


def plan(spec, scenarios, bags="none", batched=True, slots=1) -> Plan:
    """The plan for `scenarios` (of spec) on `slots` worker threads: groups of scenarios of one
    model split into chunks of about (batched scenarios) / slots, fewer where a chunk's recorded
    signals would pass MAX_CHUNK_RECORD; everything else one by one."""
    why = reason(spec, bags, batched)
    if why is not None:
        return Plan(single=list(scenarios), reason=why)
    groups = {}
    for s in scenarios:
        groups.setdefault(model_key(s["params"]), []).append(s)
    out = Plan()
    together = [g for g in groups.values() if len(g) >= 2]
    out.single = [s for g in groups.values() if len(g) < 2 for s in g]
    total = sum(len(g) for g in together)
    if not total:
        return out
    size = min(math.ceil(total / max(1, slots)), max(1, MAX_CHUNK_RECORD // record_bytes(spec)))
    for g in together:
        n = math.ceil(len(g) / size)
        bounds = [round(i * len(g) / n) for i in range(n + 1)]     # n chunks of near-equal sizes
        out.chunks += [g[a:b] for a, b in zip(bounds, bounds[1:])]
    return out
