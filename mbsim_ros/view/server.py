"""The view's web server (viser): bound to one host and port, or one line saying why not."""
from __future__ import annotations

import contextlib
import io
import socket

from ..run.network import is_loopback

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080


class ViewError(OSError):
    """The view cannot serve: a port in use, a host that cannot be bound."""


def check_bind(host: str, port: int):
    """Raise ViewError unless (host, port) can be bound now. viser itself would silently move
    to the next free port, leaving the printed URL wrong: a taken port is an error here."""
    if not 0 < int(port) < 65536:
        raise ViewError(f"--view-port {port}: expected a TCP port number from 1 to 65535")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ViewError(f"--view-host {host}: not a host name or address this machine can bind ({e.strerror})") from None
    except UnicodeError as e:        # a name IDNA cannot encode: bytes not UTF-8, a label over 63 characters
        raise ViewError(f"--view-host {host[:80]!r}: not a host name or address ({e})") from None
    family, _, _, _, address = infos[0]
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)     # as the server's own socket
        s.bind(address)
    except OSError as e:
        if e.errno in (98, 48):          # EADDRINUSE (Linux, BSD/macOS)
            raise ViewError(f"--view-port {port}: already in use on {host} (another view or server; "
                            f"give a free port, e.g. --view-port {int(port) + 1})") from None
        raise ViewError(f"--view-host {host}: cannot listen there ({e.strerror}; "
                        "give an address of this machine, e.g. 127.0.0.1 or 0.0.0.0)") from None
    finally:
        s.close()


def url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else ("[::1]" if host == "::" else host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def start_server(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, log=None):
    """A running viser server on (host, port); ViewError when it cannot bind there. log(line)
    gets a warning when the host is not a loopback address (the page controls the run)."""
    check_bind(host, port)
    import viser
    with contextlib.redirect_stdout(io.StringIO()):      # viser's banner: the run prints its own line
        server = viser.ViserServer(host=host, port=int(port), verbose=False)
    if server.get_port() != int(port):            # taken between the check and the server's bind
        stop_server(server)
        raise ViewError(f"--view-port {port}: already in use on {host} (give a free port)")
    if log is not None and not is_loopback(host):
        log(f"the view listens on {host}:{port}, reachable from other machines: anyone who can "
            "reach it can pause, reset and push the simulation")
    return server


def stop_server(server):
    """Stop a server from start_server (its connections closed, its thread joined), quietly."""
    with contextlib.redirect_stdout(io.StringIO()):
        server.stop()
