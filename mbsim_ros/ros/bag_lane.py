"""A Lane: messages of fixed layout (clock, joint states, /tf, kinematic sensors) that one
compiled call per step records into the bag's pending chunk, with no Python per message."""
from __future__ import annotations

import numpy as np

from .bag_kernels import CHUNK_LIMIT, DONE, INDEX_FULL, OVER_LIMIT, STATE_LANE_END, record_lane


def flat(index):
    """The (n, 3) int64 message index as a flat memoryview (row k at 3k)."""
    return memoryview(index).cast("B").cast("q")
# The sources a lane's values are gathered from (Lane: sources)
LANE_SOURCES = ("q", "v", "tau", "kinematic", "tf")


class Lane:
    """Messages of fixed layout that one compiled call per step fills and records into the bag's
    pending chunk, with no Python per message: the clock, joint states, /tf and the kinematic
    sensors' Imu and WrenchStamped, which come every step or every few.

    members: (handle, template (ros/templates.py), slot, due_bit, gathers, stamps) per message
    kind, in the order they are recorded at an instant. slot >= 0: a kinematic sensor's; its
    message is recorded when sample_count[slot] changed since the last record, stamped
    sample_stamp[slot]; slot -1: recorded at the steps where bit due_bit of the rates' mask
    (record) is set, stamped with the step's time. gathers: (buffer offset in the message,
    source, index) per float64 value written: sources[source][index], the sources being the
    arrays named in LANE_SOURCES (flattened). stamps: the buffer offsets of the message's
    builtin_interfaces/Time fields, each given the stamp (a TFMessage has one per transform).
    The records are the bytes BagTransport.publish would record for the template's bytes
    (tested), in the same chunks.

    rates: (period, k), the arrays of templates.due_rates: record() computes the step's due
    mask itself, in the same compiled call (one call a step instead of two: the call from Python
    is most of the cost of either), and returns it. prepare: (bits, fn): fn() is called once
    before a member whose due bit is in bits is recorded, to compute the values it gathers
    (/tf's, at the steps it is due)."""

    def __init__(self, bag, members, sources, sample_count, sample_stamp, rates=None, prepare=None):
        self.bag = bag
        self.handles = [m[0] for m in members]
        consts, table, gathers, stamps = [], [], [], []
        at = 0
        for handle, tmpl, slot, due_bit, values, stamp_at in members:
            data = bytes(tmpl.buf)
            table.append((handle.impl.id, at, len(data), slot, due_bit, len(gathers), len(gathers) + len(values),
                          len(stamps), len(stamps) + len(stamp_at)))
            gathers += values
            stamps += stamp_at
            consts.append(data)
            at += len(data)
        self.consts = np.frombuffer(b"".join(consts) or b"\0", np.uint8).copy()
        # per member: channel, its template's bytes in consts (offset, length), slot, due bit,
        # its gathers (first, end) and its stamps (first, end)
        self.table = np.array(table, np.int64).reshape(-1, 9)
        self.gathers = np.array(gathers, np.int64).reshape(-1, 3)
        self.stamps = np.array(stamps, np.int64)
        self.progress = np.zeros((len(members), 2), np.int64)    # per member: the sample count recorded, messages
        for k, (_, _, slot, _, _, _) in enumerate(members):
            if slot >= 0:
                self.progress[k, 0] = sample_count[slot]        # the samples before are not this lane's
        self.largest = 31 + max((len(c) for c in consts), default=0)
        if any(a.dtype != np.float64 or not a.flags.c_contiguous for a in sources):
            raise ValueError("a lane reads its sources in place: C-contiguous float64 arrays expected")
        self.sources = tuple(a.reshape(-1) for a in sources)
        self.sample_count, self.sample_stamp = sample_count, sample_stamp
        period, k = rates if rates is not None else (np.zeros(0), np.zeros(0, np.int64))
        self.hold, self.prepare = prepare if prepare is not None else (0, None)
        self._args = (self.consts, self.table, self.gathers, self.stamps, self.progress, *self.sources, sample_count,
                      sample_stamp, period, k)

    def record(self, t):
        """Record the messages due after the step that reached time t: those of the members with
        slot -1 whose bit is set in the due mask (templates.due_rates of the rates), and those
        whose sensor sampled. Returns the due mask."""
        bag = self.bag
        args = self._args
        mask, hold, m = -1, self.hold, 0
        with bag._lock:
            while True:
                buf = bag._lane_buffer
                if buf is None or len(buf) < bag._lane_capacity:
                    bag._close_segment()
                    buf = bag._lane_buffer = np.empty(bag._lane_capacity, np.uint8)
                    bag._state[STATE_LANE_END] = 0
                m, mask, stop = record_lane(buf, bag._state, bag._index, *args, t, mask, hold, m, CHUNK_LIMIT)
                if stop == DONE:
                    return mask
                if stop == OVER_LIMIT:
                    bag._write_chunk()
                elif stop == INDEX_FULL:         # twice as long, then go on
                    index = bag._index
                    bag._index = np.concatenate([index, np.empty_like(index)])
                else:                             # _PREPARE
                    self.prepare()
                    hold = 0

    def count(self):
        """Add the messages recorded since the last count to the handles' counts (bag lock held)."""
        for handle, k, n in zip(self.handles, self.progress[:, 1].tolist(), self.table[:, 2].tolist()):
            handle.messages += k
            handle.bytes += k * n
        self.progress[:, 1] = 0
