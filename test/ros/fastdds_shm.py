"""Remove Fast DDS shared-memory segments, semaphores and lock files no running process uses.

    python test/ros/fastdds_shm.py        (prints how many it removed)

A process killed inside Fast DDS's shared-memory transport leaves its port segment and the
port's mutex in /dev/shm; a later participant that opens that port can wait on the dead
process's lock forever (a test's node creation hung so). Files some process still maps or
holds open are in use and stay."""
import os
import sys

SHM = "/dev/shm"


def paths_in_use():
    """Files under SHM some process maps or holds open (a port's lock file is only open)."""
    paths = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    if SHM in line:
                        paths.add(line.split(None, 5)[-1].strip().removesuffix(" (deleted)"))
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith(SHM):
                    paths.add(target)
        except OSError:
            pass                  # gone meanwhile, or not ours to read
    return paths


def remove_stale():
    if not os.path.isdir(SHM):
        return 0
    in_use = paths_in_use()
    removed = 0
    for name in os.listdir(SHM):
        path = os.path.join(SHM, name)
        if (name.startswith("fastrtps") or name.startswith("sem.fastrtps")) and path not in in_use:
            try:
                os.unlink(path)
                removed += 1
            except OSError:
                pass
    return removed


if __name__ == "__main__":
    print(f"removed {remove_stale()} stale Fast DDS shared-memory files from {SHM}", file=sys.stderr)
