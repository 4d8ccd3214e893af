"""The devices:, emulate: and commands: sections: defaults, config/hil.yaml, and bad entries
ending `mbsim run` with one clear line (status 2) before anything runs."""
import os
import re
from pathlib import Path

import pytest
import yaml

from mbsim_ros.cli import main
from mbsim_ros.hil.entries import DEVICE_DEFAULTS
from mbsim_ros.model import ConfigError
from mbsim_ros.run.config import load_config

REPO = Path(__file__).resolve().parents[2]


def test_a_device_entry_gets_its_defaults_and_its_source_from_port_or_topic():
    c = load_config(None, {"devices": {"WaistGyro": {"port": "/dev/ttyUSB0", "protocol": "csv"},
                                       "RightAnkleForceSensor": {"topic": "/ft/wrench"}}})
    gyro = c.devices["WaistGyro"]
    assert gyro["source"] == "serial" and gyro["on_fault"] == "hold" and gyro["baudrate"] == 115200
    assert gyro["max_age"] == DEVICE_DEFAULTS["max_age"] and gyro["rotation"] == [0.0, 0.0, 0.0]
    assert c.devices["RightAnkleForceSensor"]["source"] == "ros"
    assert load_config(None, {"commands": {"port": "/dev/x", "joints": ["A"]}}).commands["mode"] == "position"


def test_config_hil_yaml_loads_and_documents_every_key():
    path = REPO / "config" / "hil.yaml"
    c = load_config(path)
    text = path.read_text()
    assert set(c.devices) == {"WaistAccelSensor", "WaistGyro", "ChestRange", "RightAnkleForceSensor"}
    for key in DEVICE_DEFAULTS:
        assert re.search(rf"\n +{key}:", text), key
    raw = yaml.safe_load(text)
    assert raw["devices"]["WaistAccelSensor"] == {k: v for k, v in c.devices["WaistAccelSensor"].items()
                                                  if k not in ("topic",)}


@pytest.mark.parametrize("section, message", [
    ({"devices": {"WaistGyro": {"port": "/dev/null", "protocol": "csv", "source": "usb"}}},
     "devices.WaistGyro.source: expected one of serial, ros, sim, got 'usb'"),
    ({"devices": {"WaistGyro": {"port": "/dev/null", "protocol": "csv", "on_fault": "zero"}}},
     "devices.WaistGyro.on_fault: expected one of hold, sim, drop"),
    ({"devices": {"WaistGyro": {"protocol": "csv"}}}, "devices.WaistGyro: the real device is missing"),
    ({"devices": {"WaistGyro": {"port": "/dev/null"}}}, "devices.WaistGyro.protocol: a serial device needs"),
    ({"devices": {"WaistGyro": {"port": "/dev/null", "protocol": "csv", "rotation": [0, 0]}}},
     "devices.WaistGyro.rotation: expected [roll, pitch, yaw]"),
    ({"devices": {"WaistGyro": {"port": "/dev/null", "protocol": "csv", "max_age": -1}}},
     "devices.WaistGyro.max_age: expected a finite number > 0"),
    ({"devices": {"WaistGyro": {"topic": "ft", "source": "ros"}}}, "devices.WaistGyro.topic: expected an absolute"),
    ({"devices": ["WaistGyro"]}, "devices must be a mapping"),
    ({"emulate": {"ChestRange": {"protocol": "scip2"}}}, "emulate.ChestRange.port"),
    ({"commands": {"port": "/dev/null", "joints": []}}, "commands.joints: expected the list"),
    ({"commands": {"port": "/dev/null", "joints": ["A"], "mode": "torque"}}, "commands.mode: expected one of"),
])
def test_bad_sections_are_one_clear_error_at_load(section, message):
    with pytest.raises(ConfigError) as e:
        load_config(None, section)
    assert message in str(e.value) and "\n" not in str(e.value)


def run_with(tmp_path, capsys, config):
    cfg = tmp_path / "hil.yaml"
    cfg.write_text(yaml.safe_dump(config))
    status = main(["run", "--config", str(cfg), "--transport", "none", "--duration", "0.01", "--quiet",
                   "--bag", str(tmp_path / "bag")])
    err = capsys.readouterr().err.strip().splitlines()
    return status, err


@pytest.mark.parametrize("config, message", [
    ({"devices": {"NoSuchSensor": {"port": "/dev/null", "protocol": "csv"}}},
     "devices.NoSuchSensor: unknown sensor 'NoSuchSensor'; the models have ChestRange, "),
    ({"devices": {"WaistGyro": {"port": "/dev/null", "protocol": "nmea"}}},
     "devices.WaistGyro.protocol: expected one of csv, scip2, xsens, got 'nmea'"),
    ({"devices": {"WaistGyro": {"port": "/dev/ttyUSB97", "protocol": "csv"}}},
     "devices.WaistGyro.port: /dev/ttyUSB97 does not exist"),
    ({"devices": {"WaistGyro": {"port": "tcp://localhost:1", "protocol": "csv"}}},
     "pyserial has no URL handler tcp://"),
    ({"devices": {"WaistGyro": {"port": "/dev/null", "protocol": "scip2"}}}, "scip2 carries range data"),
    ({"devices": {"LeftCamera": {"port": "/dev/null", "protocol": "csv"}}}, "LeftCamera is a camera sensor"),
    ({"devices": {"ChestRange": {"port": "/dev/null", "protocol": "scip2", "rotation": [0, 0, 1]}}},
     "devices.ChestRange.rotation: a range sensor's scan is distances along the simulated rays"),
    ({"sensors": {"WaistGyro": {"enabled": False}}, "devices": {"WaistGyro": {"port": "/dev/null", "protocol": "csv"}}},
     "devices.WaistGyro: sensor WaistGyro is disabled"),
    ({"emulate": {"NoSuchSensor": {"port": "/dev/null", "protocol": "csv"}}}, "emulate.NoSuchSensor: unknown sensor"),
    ({"devices": {"WaistGyro": {"topic": "/SR1/WaistGyro"}}},
     "devices.WaistGyro.topic: /SR1/WaistGyro is published by this simulation"),
    ({"devices": {"WaistGyro": {"topic": "/ft driver/x"}}}, "devices.WaistGyro.topic: not an absolute ROS topic name"),
    ({"devices": {"WaistGyro": {"topic": "/driver/x"}, "RightAnkleForceSensor": {"topic": "/driver/x"}}},
     # (safe_dump sorts the keys: the force sensor comes first)
     "devices.WaistGyro.topic: /driver/x is read as geometry_msgs/msg/WrenchStamped for RightAnkleForceSensor; "
     "a gyro sensor reads sensor_msgs/msg/Imu"),
    ({"emulate": {"WaistGyro": {"port": "/dev/ttyUSB98", "protocol": "csv"}}}, "emulate.WaistGyro.port: /dev/ttyUSB98 does not exist"),
    ({"commands": {"port": "/dev/null", "joints": ["RARM_ELBOW", "NO_JOINT"]}}, "commands.joints: unknown joint(s) NO_JOINT"),
    ({"commands": {"port": "/dev/ttyUSB99", "joints": ["RARM_ELBOW"]}}, "commands.port: /dev/ttyUSB99 does not exist"),
    ({"emulate": {"WaistGyro": {"port": "/dev/null", "protocol": "csv"}, "ChestRange": {"port": "/dev/null", "protocol": "scip2"}}},
     "one port (/dev/null) serves one emulated sensor, or an accelerometer and a gyro as one Xsens MTi"),
    ({"sensors": {"WaistGyro": {"rate": 500}}, "emulate": {"WaistGyro": {"port": "/dev/null", "protocol": "xsens"},
                                                         "WaistAccelSensor": {"port": "/dev/null", "protocol": "xsens"}}},
     "they must sample together: rates 1000 and 500 Hz"),
    ({"devices": {"WaistGyro": {"port": "/dev/null", "protocol": "csv"}},
      "emulate": {"WaistAccelSensor": {"port": "/dev/null", "protocol": "csv"}}},
     "emulate.WaistAccelSensor.port: /dev/null is already used by devices.WaistGyro"),
])
def test_bad_config_ends_mbsim_run_with_one_clear_line(tmp_path, capsys, config, message):
    status, err = run_with(tmp_path, capsys, config)
    assert status == 2
    assert len(err) == 1 and err[0].startswith("mbsim: ") and message in err[0], err
    assert not os.path.exists(tmp_path / "bag")        # no empty bag left behind to block the next run


def test_the_protocols_get_their_own_options_only():
    """A devices:/emulate: entry holds the runtime's keys and the protocol's options; the parser
    gets the latter (and refuses a misspelt one)."""
    from harness import model_sensor

    from mbsim_ros.hil.entries import protocol_options
    from mbsim_ros.hil.protocols import ProtocolError, make_encoder, make_parser
    entry = load_config(None, {"devices": {"WaistGyro": {"port": "/dev/x", "protocol": "csv", "separator": ";",
                                                         "resample": "each"}}}).devices["WaistGyro"]
    assert protocol_options(entry) == {"protocol": "csv", "separator": ";"}
    assert make_parser(protocol_options(entry), model_sensor("WaistGyro")).feed(b"1;2;3\n")[0].values.tolist() == [1, 2, 3]
    assert make_encoder(protocol_options(entry), model_sensor("WaistGyro")).encode([1, 2, 3], 0.0) == b"1.0;2.0;3.0\n"
    with pytest.raises(ProtocolError, match="seperator"):
        make_parser(protocol_options(dict(entry, seperator=";")), model_sensor("WaistGyro"))
