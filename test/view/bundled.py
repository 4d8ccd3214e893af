"""The bundled world's run.Session with a LiveView as its listener, for the view's tests."""
from conftest import free_port


def session_with_view(view_thread=True):
    """(session, view, models): the bundled world at real-time factor 1, paused and not running
    (controls run here and now until session.start()). view_thread=False stops the view's
    thread, so that the test pushes the frames itself."""
    from mbsim_ros.run import Session, build_simulation, load_config, load_world
    from mbsim_ros.view.live import LiveView
    config = load_config(None, {"real_time_factor": 1.0})
    models, _ = load_world(config)
    sim = build_simulation(models, config)
    view = LiveView(port=free_port())
    session = Session(sim, config, listeners=[view])
    session.pause()
    if not view_thread:
        view._stop.set()
        view._wake.set()
        view._thread.join()
    return session, view, models
