"""The browser view of a simulation, built on viser.

    server.py  the web server: bind to a host and port (one clear error when it cannot)
    scene.py   a world's scene nodes: geometry, frames, centres of mass, contacts and sensors
               built once from the Models, then moved each frame from link poses (arrays)
    live.py    LiveView: a Session listener that snapshots the running simulation in on_step
               and pushes it to the browsers from a thread of its own, with the controls
    process.py ViewProcess: the same view served from a process of its own (child.py), so that
               it never holds the run's interpreter lock: what `mbsim run --view` and the node use

scene.py knows nothing of a running Session, so a recorded bag's replay draws with it too.
"""
from .server import DEFAULT_HOST, DEFAULT_PORT, ViewError, start_server, stop_server, url

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "ViewError", "start_server", "stop_server", "url"]
