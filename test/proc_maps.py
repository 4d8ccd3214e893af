"""The mapping of this process that holds an address, read from Linux's /proc/self/smaps."""


def mapping(address):
    """{field: value} of the mapping holding `address`: the smaps fields in kB ("Rss",
    "AnonHugePages", ...) as ints, "VmFlags" as a list of its two-letter flags."""
    with open("/proc/self/smaps") as f:
        lines = f.read().splitlines()
    for k, line in enumerate(lines):
        head = line.split()[0] if line else ""
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(x, 16) for x in head.split("-"))
            if lo <= address < hi:
                fields = {}
                for item in lines[k + 1:]:
                    name, _, value = item.partition(":")
                    if name == "VmFlags":
                        fields[name] = value.split()
                        return fields
                    fields[name] = int(value.split()[0]) if value.split() and value.split()[0].isdigit() else value
    raise AssertionError(f"no mapping holds {address:#x}")
