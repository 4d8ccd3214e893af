"""What a bag's Lane (ros/bag_lane.py) records of a world: the clock, joint_states, /tf and every
kinematic sensor without a delay, a real device or a serial emulation (the messages of every
step or every few), filled and recorded in the physics thread by one compiled call a step,
straight into the pending chunk: the same messages, byte for byte, as the Bridge's
MessageWriter writes (ros/message_writers.py)."""
from __future__ import annotations

import numpy as np

from . import templates as tpl
from .message_writers import KINEMATIC_KINDS, kinematic_template
from .topic_layout import CLOCK_BIT, JOINT_STATES_BIT, TF_BIT


def lane_members(sim, pubs, layout, frame, hil):
    """(members, tf_values, devices): a Lane's members (bag_lane.Lane) for the world `sim`,
    whose publications are `pubs` (key -> handle) and whose layout is `layout` (WorldLayout);
    tf_values: the array /tf's values are gathered from (7 per moving edge, computed before the
    lane records /tf); devices: the names of the devices whose messages it records. frame: a
    name -> its frame id; hil: the hardware in the loop, whose devices it leaves out, or None."""
    js = tpl.JointStateTemplate(layout.dof_names)
    clock = tpl.ClockTemplate()
    # (publication, template, sensor slot or -1, due bit, gathers: (offset in the message,
    # source, index) with sources 0-4 = q, v, tau, the sensors' values, /tf's values
    # (bag_lane.LANE_SOURCES), the stamps' offsets in the message)
    members = [(pubs["clock"], clock, -1, CLOCK_BIT.bit_length() - 1, [], [4 + clock.stamp_at]),
               (pubs["joint_states"], js, -1, JOINT_STATES_BIT.bit_length() - 1,
                [(js.position_at + 8 * k, 0, int(i)) for k, i in enumerate(layout.dof_q)]
                + [(js.velocity_at + 8 * k, 1, int(i)) for k, i in enumerate(layout.dof_v)]
                + [(js.effort_at + 8 * k, 2, int(i)) for k, i in enumerate(layout.dof_v)], [4 + js.stamp_at])]
    tf_values = np.zeros(0)
    if layout.moving:         # each edge's (x, y, z, qx, qy, qz, qw) from tf_values, in order
        tf = tpl.TfTemplate(layout.tf_layout[0])
        tf_values = np.zeros(7 * len(layout.moving))
        members.append((pubs["tf"], tf, -1, TF_BIT.bit_length() - 1,
                        [(4 + 8 * (int(at) + j), 4, 7 * e + j) for e, at in enumerate(tf.value_index)
                         for j in range(7)], [4 + 4 * int(s) for s in tf.stamp_index]))
    other = set(hil.sources) | set(hil.emulators) if hil is not None else set()
    slot = sim.kinematic_samples[0]
    devices = set()

    def values(at, dev):
        return [(at + 8 * c, 3, 6 * slot[dev.name] + c) for c in range(3 if dev.kind != "force" else 6)]
    for dev in sim.devices.values():
        if dev.kind not in KINEMATIC_KINDS or dev.delay != 0 or dev.name in other or not dev.enabled:
            continue
        if dev.name in layout.merged:
            topic, acc, gyro = layout.merged[dev.name]
            if dev is not acc or not gyro.enabled or gyro.name in other:
                continue            # (acc and gyro have the same rate and delay: merged so)
            tmpl = tpl.ImuTemplate(frame(acc.frame), accel=True, gyro=True, accel_variance=acc.variance,
                                   gyro_variance=gyro.variance)
            members.append((pubs[topic], tmpl, slot[acc.name], 0,
                            values(tmpl.accel_at, acc) + values(tmpl.gyro_at, gyro), [4 + tmpl.stamp_at]))
            devices |= {acc.name, gyro.name}
        elif dev.name in pubs:
            tmpl = kinematic_template(dev, frame(dev.frame))
            at = tmpl.values_at if dev.kind == "force" else tmpl.accel_at if dev.kind == "accelerometer" else tmpl.gyro_at
            members.append((pubs[dev.name], tmpl, slot[dev.name], 0, values(at, dev), [4 + tmpl.stamp_at]))
            devices.add(dev.name)
    return members, tf_values, devices
