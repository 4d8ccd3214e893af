"""`mbsim run --view`: the URL in the run's first lines, the page served by the run itself; a
port in use and a host that cannot be bound are one line and exit status 2."""
import os
import socket
import subprocess
import sys

from conftest import fetch_page, free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def mbsim(*args, **kw):
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "mbsim_ros.cli", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_a_port_in_use_is_one_line_and_status_2():
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        p = mbsim("run", "--view", "--view-port", str(port), "--transport", "none", "--quiet")
        out, err = p.communicate(timeout=300)
    finally:
        taken.close()
    assert p.returncode == 2
    assert err.strip().splitlines() == [f"mbsim: --view-port {port}: already in use on 127.0.0.1 (another view "
                                        f"or server; give a free port, e.g. --view-port {port + 1})"]


def test_a_host_that_cannot_be_bound_is_one_line_and_status_2():
    p = mbsim("run", "--view", "--view-host", "192.0.2.1", "--transport", "none", "--quiet")
    out, err = p.communicate(timeout=300)
    assert p.returncode == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mbsim: --view-host 192.0.2.1: cannot listen there"), lines


def test_the_run_serves_the_page_at_the_url_it_prints():
    port = free_port()
    p = mbsim("run", "--view", "--view-port", str(port), "--duration", "600", "--transport", "none", "--quiet")
    try:
        first = p.stdout.readline()
        assert first.strip() == f"view: http://127.0.0.1:{port} (open it in a browser)"
        assert p.stdout.readline().startswith("simulating ")     # running (SIGTERM is caught from here)
        page = fetch_page(f"http://127.0.0.1:{port}", p, 300)
        assert "<html" in page.lower() and "viser" in page.lower()
    finally:
        p.terminate()
        out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert "stopped by SIGTERM" in err
