"""Fast DDS memory over a long run.

rmw_fastrtps keeps each endpoint's samples in a pool (history memory PREALLOCATED_WITH_REALLOC)
that grows to the most samples it ever held at once and never shrinks. When a subscriber falls
behind, a camera topic's writer holds up to its keep-last depth of images, and the pool keeps that
memory for the rest of the run: over hours the process's memory steps up each time the machine is
busier than before. The DYNAMIC policy allocates a sample when it is written and frees it when it
leaves the history. It is set the way rmw_fastrtps documents (a default XML profile and
RMW_FASTRTPS_USE_QOS_FROM_XML=1), before rclpy starts, and only where the middleware is Fast DDS
and the user has configured none of this themselves.
"""
import os
from pathlib import Path

PROFILES = Path(__file__).resolve().parents[1] / "data" / "fastdds_profiles.xml"
USER_SETTINGS = ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE",
                 "RMW_FASTRTPS_USE_QOS_FROM_XML", "RMW_FASTRTPS_PUBLICATION_MODE")


def free_samples_when_done(environ=os.environ, cwd="."):
    """Point Fast DDS at our profile (in `environ`, before rclpy.init). False, changing nothing,
    where another middleware is chosen or the user set their own profiles or modes (the variables
    above, or a DEFAULT_FASTRTPS_PROFILES.xml in the working directory, which Fast DDS loads)."""
    if not environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp").startswith("rmw_fastrtps"):
        return False
    if any(environ.get(name) for name in USER_SETTINGS) or (Path(cwd) / "DEFAULT_FASTRTPS_PROFILES.xml").exists():
        return False
    environ["FASTRTPS_DEFAULT_PROFILES_FILE"] = str(PROFILES)
    environ["RMW_FASTRTPS_USE_QOS_FROM_XML"] = "1"
    return True
