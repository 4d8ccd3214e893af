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


def view_processes(pid):
    """The processes `pid` started (the view's), by /proc's children lists of its threads."""
    kids = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            kids.update(int(k) for k in f.read().split())
    return kids


def allowed_cores(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        line = next(x for x in f if x.startswith("Cpus_allowed_list:"))
    cores = set()
    for part in line.split(":")[1].strip().split(","):
        lo, _, hi = part.partition("-")
        cores.update(range(int(lo), int(hi or lo) + 1))
    return cores


def test_the_run_serves_the_page_at_the_url_it_prints_and_keeps_the_view_off_a_pinned_core():
    """... and with `--cpu K` (given where the machine has more than one core) the view's
    process runs on the other cores only: the CLI hands the run's `cpu` to the view."""
    port = free_port()
    cores = sorted(os.sched_getaffinity(0))
    pinned = ["--cpu", str(cores[0])] if len(cores) > 1 else []
    p = mbsim("run", "--view", "--view-port", str(port), "--duration", "600", "--transport", "none", "--quiet",
              *pinned)
    try:
        first = p.stdout.readline()
        assert first.strip() == f"view: http://127.0.0.1:{port} (open it in a browser)"
        assert p.stdout.readline().startswith("simulating ")     # running (SIGTERM is caught from here)
        page = fetch_page(f"http://127.0.0.1:{port}", p, 300)
        assert "<html" in page.lower() and "viser" in page.lower()
        if pinned:
            (child,) = view_processes(p.pid)
            for tid in os.listdir(f"/proc/{child}/task"):
                assert allowed_cores(child, tid) == set(cores[1:]), f"view thread {tid} may run on core {cores[0]}"
    finally:
        p.terminate()
        out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert "stopped by SIGTERM" in err
