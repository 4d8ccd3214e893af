"""What the servers that show a run (the view, the Foxglove transport) share about addresses."""
from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether a server bound to host is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
