"""`mbsim warmup`: compile every numba kernel ahead of time, into the kernel cache of this
installation (for an install step, a container build, CI), so that no later run, sim_node start
or Simulation() compiles.

A world's kernels differ only by what the world has, not by its sizes (they take flat buffers):
the integrator (semi-implicit Euler or RK4), force elements or none (forces.forces_or_none),
penalty contact or not, and the sensor kinds. So a few small worlds call every kernel: the
bundled SR1 world (every sensor kind, LCP contact), a slider with a spring and a force sensor
(force elements), a slider with penalty contact, each with both integrators, the Python API's
functions on SR1, and the TF message kernel.
"""
import numpy as np


def _slider(spring: bool):
    """One body on a prismatic joint, with a spring to the world or without; a force sensor."""
    from .model import Joint, Link, Model, Sensor, SpringDamper
    m = Model("warmup_slider", gravity=(0.0, 0.0, -9.80665))
    m.add_link(Link("body", 1.0, [0, 0, 0], np.eye(3) * 0.1))
    m.add_joint(Joint("x", "prismatic", None, "body", axis=[1, 0, 0]))
    m.sensors.append(Sensor("force", "force", "body"))
    if spring:
        m.forces.append(SpringDamper("spring", None, np.array([-1.0, 0, 0]), "body", np.zeros(3),
                                     free_length=1.0, stiffness=10.0))
    return m.finalize()


def _python_api(models):
    import mbsim_ros as mb
    model = models[0]
    q, v = model.initial_q(), np.zeros(model.nv)
    mb.forward_dynamics(model, q, v, np.zeros(model.nv))
    mb.inverse_dynamics(model, q, v, np.zeros(model.nv))
    mb.mass_matrix(model, q)
    mb.link_transforms(model, q)
    mb.link_velocities(model, q, v)
    mb.link_accelerations(model, q, v, np.zeros(model.nv))
    mb.frame_jacobian(model, q, model.links[-1].name)
    mb.center_of_mass(model, q)
    mb.integrate(model, q, v, 0.001)


def jobs():
    """[(name, call)]: every kernel, world by world."""
    import mbsim_ros as mb
    from .ros import bag, templates
    from .ros.world import DEFAULT_WORLD, load_models
    world, _ = load_models(DEFAULT_WORLD)

    def with_forces():
        sim = mb.Simulation(_slider(True))
        sim.applied_forces()
        sim.sense(sim.q, sim.v, np.zeros(sim.nv))
    return [
        ("SR1 world: step, sensors, cameras, range", lambda: mb.Simulation(world)),
        ("RK4 step", lambda: mb.Simulation(_slider(False), integrator="rk4", contact="none")),
        ("force elements", with_forces),
        ("force elements, RK4 step", lambda: mb.Simulation(_slider(True), integrator="rk4", contact="none")),
        ("penalty contact", lambda: mb.Simulation(_slider(False), contact="penalty")),
        ("penalty contact, RK4 step", lambda: mb.Simulation(_slider(False), integrator="rk4", contact="penalty")),
        ("Python API", lambda: _python_api(world)),
        ("TF poses", templates.warm_up),
        ("bag recording", bag.warm_up),
    ]


def warm_up_everything():
    from ._kernel_cache import warm_up
    warm_up(jobs())
