"""Controllers and metrics the batch tests name by import path (workers import this module: it
is on sys.path where the test runs, and Dask's spawned workers inherit sys.path)."""
import os
import signal

import numpy as np


def push(world, effort=0.0):
    """Joint efforts (every DOF in model order: the free base's six, then the arm) from t = 0."""
    world.joint_efforts([0.0] * 6 + [effort])


def die_once(world, marker):
    """Kill this worker process the first time any scenario runs it (marker file absent); then,
    rerun elsewhere, behave as an undriven scenario."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return None
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)


def swing(world, target=0.5):
    """A controller loop: position target on the arm every control period, sent as a ROS node would."""
    def tick(w):
        w.joint_commands(["ARM"], position=[target])
    return tick


def arm_final(sig):
    """A custom metric: the arm's final angle."""
    return float(sig.joint("ARM")[-1])


def arm_peak(sig, scale=1.0):
    return float(scale * np.abs(sig.joint("ARM")).max())


def base_z(sig):
    """The base's final height, as recorded (no arithmetic: compared bit for bit)."""
    return float(sig.q[-1, 2])


def gyro_last_x(sig):
    """The gyro's last reading's x (noise included)."""
    return float(sig.readings["IMU_GYRO"][1][-1, 0])


def wave(world, amplitude=0.3):
    """A scenario written as a test writes one: commands and world.run in sequence. The batch
    runs what is left of its duration afterwards."""
    world.joint_commands(["ARM"], position=[amplitude])
    world.run(0.1)
    world.joint_commands(["ARM"], position=[-amplitude])
    world.run(0.05)


def die_always(world):
    """Kill this worker process every time: a scenario no worker survives."""
    os.kill(os.getpid(), signal.SIGKILL)
