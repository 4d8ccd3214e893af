"""/diagnostics of a run: one status for the simulation (the session's live statistics, level 1
while slower than the real-time factor asked for), one per sensor that has a reading (level 1
while saturated), and the hardware in the loop's (ros/hil_topics.py)."""
from __future__ import annotations


def statuses(stats, config, sim, hil=None):
    """[(name, level, message, {key: text})] for a diagnostic_msgs/DiagnosticArray."""
    rtf_target = config.target_rtf
    rtf = stats.get("rtf_recent", stats.get("rtf"))
    level = 0
    message = "running"
    if rtf is not None and config.paced and rtf < 0.9 * rtf_target:
        level, message = 1, f"slower than real time x{rtf_target:g}"
    values = {k: f"{v:.4g}" if isinstance(v, float) else str(v) for k, v in stats.items()}
    if sim.actuator_names:
        values["actuators_enabled"] = str(sim.actuators_enabled).lower()
    out = [("mbsim: simulation", level, message, values)]
    for name, dev in list(sim.devices.items()):
        r = dev.latest
        if r is None:
            continue
        sat = getattr(r, "saturated", False)
        out.append((f"mbsim: {name}", 1 if sat else 0, "saturated" if sat else "ok",
                    {"kind": dev.kind, "rate": f"{dev.rate:g}", "stamp": f"{r.stamp:.6f}"}))
    if hil is not None:
        out += hil.statuses()
    return out
