"""OpenSim's wrist model (opensim-models Models/WristModel/wrist.osim, not shipped here) simulated
by mbsim_ros and by OpenSim 4.6: its hand hangs on a chain of massless auxiliary bodies whose
coordinates CoordinateCouplerConstraints tie to `flexion` and `deviation`, the coordinates of a
massless body ("imagine") that nothing but the couplers moves.

The file gives every body zero mass (a kinematic model: OpenSim cannot simulate it as it is), so
this script writes variants: the bones get masses (ours; the auxiliary bodies rotaxis, aux*,
carp_metacarp stay massless), muscles are switched off (appliesForce false; we do not model
muscles), and "imagine" gets a mass EPS or none. OpenSim 4.6 cannot simulate a massless
"imagine" (its articulated-body pass divides by the zero inertia of a terminal body: NaN), so
the massless case is compared with OpenSim at EPS = 1e-3 .. 1e-6 kg, which converges to it.

    python bench/wrist_vs_opensim.py PATH/TO/wrist.osim [--time 0.2] [--dt 1e-4]

prints the largest coordinate difference over the run (rad), per variant and time step."""
import argparse
import math
import os
import sys
import tempfile
import time
import warnings
import xml.etree.ElementTree as ET

import numpy as np

AUXILIARY = {"rotaxis", "auxprfem", "auxprrud", "auxdrfem", "auxdrrud", "carp_metacarp"}
FOREARM = {"ulna": 0.6, "radius": 0.5}          # kg; every other bone 0.03 kg
# initial coordinates and speeds; the coupled ones follow from OpenSim's coupler functions
START = {"elbow_flexion": (0.5, 1.0), "pro_sup": (0.3, -1.0), "flexion": (0.2, 2.0),
         "deviation": (0.1, 1.0), "PIP_flex": (0.2, 0.0)}


def write_variant(src, dst, imagine_mass):
    tree = ET.parse(src)
    for body in tree.getroot().iter("Body"):
        name = body.get("name")
        if name in AUXILIARY or (name == "imagine" and imagine_mass == 0.0):
            continue
        m = imagine_mass if name == "imagine" else FOREARM.get(name, 0.03)
        length = 0.12 if name in FOREARM else 0.02
        body.find("mass").text = repr(m)
        body.find("mass_center").text = f"0 {-length} 0"
        i = m * length ** 2 / 12
        body.find("inertia").text = f"{i} {i / 2} {i} 0 0 0"
    for el in tree.getroot().iter():
        flag = el.find("appliesForce")
        if flag is not None:
            flag.text = "false"
    tree.write(dst)


def start_state(model):
    """START and the coupled coordinates and speeds, from the OpenSim model's couplers."""
    import opensim as osim
    state = dict(START)
    constraints = model.getConstraintSet()
    for i in range(constraints.getSize()):
        c = osim.CoordinateCouplerConstraint.safeDownCast(constraints.get(i))
        q, u = START[c.getIndependentCoordinateNames().get(0)]
        f, x = c.getFunction(), osim.Vector(1, q)
        state[c.getDependentCoordinateName()] = (f.calcValue(x), f.calcDerivative(osim.StdVectorInt([0]), x) * u)
    return state


def opensim_run(path, times, accuracy):
    import opensim as osim
    model = osim.Model(path)
    s = model.initSystem()
    cs = model.getCoordinateSet()
    start = start_state(model)
    for name, (q, u) in start.items():
        cs.get(name).setValue(s, q, False)
        cs.get(name).setSpeedValue(s, u)
    model.realizeVelocity(s)
    assert np.abs(s.getQErr().to_numpy()).max() < 1e-12 and np.abs(s.getUErr().to_numpy()).max() < 1e-12
    names = [cs.get(i).getName() for i in range(cs.getSize())]
    manager = osim.Manager(model)
    manager.setIntegratorAccuracy(accuracy)
    s.setTime(0.0)
    manager.initialize(s)
    out = []
    for t in times:
        s = manager.integrate(t)
        out.append([cs.get(n).getValue(s) for n in names])
    return names, np.array(out), start


def mbsim_run(path, names, times, start, dt, **options):
    import mbsim_ros as mb
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # the wrist's meshes are not beside the variant
        model = mb.load_model(path)
    sim = mb.Simulation(model, dt=dt, contact="none", **options)
    index = [model.dof_names.index(n) for n in names]
    for name, (q, u) in start.items():
        sim.q[model.dof_names.index(name)] = q
        sim.v[model.dof_names.index(name)] = u
    out = []
    for t in times:
        sim.step(int(round((t - sim.t) / dt)))
        out.append(sim.q[index].copy())
    return np.array(out), sim.notes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wrist")
    ap.add_argument("--time", type=float, default=0.2)
    ap.add_argument("--dt", type=float, nargs="+", default=[4e-4, 2e-4, 1e-4])
    ap.add_argument("--accuracy", type=float, default=1e-9)
    a = ap.parse_args(argv)
    times = np.linspace(0.0, a.time, 21)[1:]
    tmp = tempfile.mkdtemp()
    print(f"{a.time:g} s from the same start; OpenSim 4.6 RungeKuttaMerson at accuracy {a.accuracy:g}; "
          "mbsim_ros semi-implicit Euler; largest |q_mbsim - q_OpenSim| over 20 samples, rad")
    variants = [("imagine 0.03 kg in both", 0.03, 0.03)] + [
        (f"imagine massless (mbsim) vs {eps:g} kg (OpenSim)", 0.0, eps) for eps in (1e-3, 1e-4, 1e-5, 1e-6)]
    mb_cache = {}
    for label, mb_mass, os_mass in variants:
        os_path = os.path.join(tmp, f"wrist_{os_mass:g}.osim")
        write_variant(a.wrist, os_path, os_mass)
        t0 = time.perf_counter()
        names, q_os, start = opensim_run(os_path, times, a.accuracy)
        t_os = time.perf_counter() - t0
        row = []
        for dt in a.dt:
            if (mb_mass, dt) not in mb_cache:
                mb_path = os.path.join(tmp, f"wrist_mb_{mb_mass:g}.osim")
                write_variant(a.wrist, mb_path, mb_mass)
                mb_cache[mb_mass, dt] = mbsim_run(mb_path, names, times, start, dt)[0]
            err = np.abs(mb_cache[mb_mass, dt] - q_os)
            worst = names[int(np.argmax(err.max(axis=0)))]
            row.append(f"dt {dt:g}: {err.max():.2e} ({worst})")
        print(f"{label:44s} " + "; ".join(row) + f"  [OpenSim {t_os:.1f} s]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
