"""Kernel groups for test_warmup.py: each compiles one small numba function and burns a little
CPU (so that a poll sees it running), writing its pid and start/end times to $WARMUP_LOG."""
import os
import time


def _log(name, what):
    with open(os.environ["WARMUP_LOG"], "a") as f:
        f.write(f"{name} {what} {os.getpid()} {time.monotonic()}\n")


def _burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def _group(name):
    from numba import njit
    _log(name, "start")
    f = njit(lambda x: x + 1)          # no cache: compiles in every process
    f(1)
    _burn(0.6)
    _log(name, "end")


def first():
    _group("first")


def second():
    _group("second")


def third():
    _group("third")


def broken():
    raise ValueError("no such kernel")
