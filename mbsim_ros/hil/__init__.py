"""Hardware in the loop: real devices in place of simulated sensors, and simulated sensors
written out over serial for a real controller. Imports nothing of ROS.

- `protocols`: device protocols (csv lines, Hokuyo SCIP 2.0, a binary IMU): bytes <-> samples
- `config`: the `devices:`, `emulate:` and `commands:` sections of the run configuration
  (config/hil.yaml documents them)
- `link`: a serial port (any pyserial URL) in its own thread, reconnecting with backoff
- `sources`: a real device's samples handed to the physics thread (clock mapping, max age,
  resampling, state ok/stale/down, on_fault, residual against the simulated value)
- `serial_device`: a serial device's bytes through its protocol parser(s) into sources
- `emulate`: a simulated sensor written out of a serial port in a device protocol
- `commands`: joint commands read from a serial port (csv lines)

The ROS layer (mbsim_ros/ros/hil_topics.py) wires these to topics, /diagnostics and services.
"""
