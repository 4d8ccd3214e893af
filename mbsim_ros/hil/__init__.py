"""Hardware in the loop: real devices in place of simulated sensors, simulated devices for real boards.
protocols/ holds the device protocols (parsers and encoders)."""
