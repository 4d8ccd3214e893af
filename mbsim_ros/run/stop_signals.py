"""SIGINT and SIGTERM as a request to stop, for the sim_node and `mbsim run`: the handler only
records the signal and asks the caller to stop (e.g. Runner.stop(), safe from a handler: its lock
is re-entrant), so the run ends at a step boundary, the queued messages go out and the bag is
closed; the process then exits with status 0. Python's defaults would raise KeyboardInterrupt
anywhere (SIGINT) or end the process without closing the bag (SIGTERM, which `ros2 launch` and
`systemctl stop` send)."""
import signal

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def catch_stop_signals(on_signal):
    """From now on SIGINT and SIGTERM call on_signal(signum) (in the main thread) and nothing
    else. Returns restore(): puts the previous handlers back."""
    previous = {s: signal.signal(s, lambda signum, frame: on_signal(signum)) for s in STOP_SIGNALS}

    def restore():
        for s, handler in previous.items():
            signal.signal(s, handler)
    return restore


def signal_name(signum) -> str:
    """'SIGINT', 'SIGTERM'."""
    return signal.Signals(signum).name
