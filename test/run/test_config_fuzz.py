"""Mutated run configurations (config/*.yaml, the mutations of test_fuzz_loaders: bytes flipped,
spans cut or repeated, nasty tokens) end in a RunConfig or a ConfigError naming the file, never
another exception; through `mbsim run --config` one line and exit status 2. A seeded slice here;
bench/fuzz.py runs the wide campaign."""
import random
import sys
from pathlib import Path

import pytest

from mbsim_ros.model import ConfigError
from mbsim_ros.run.config import load_config

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "formats"))
from test_fuzz_loaders import mutate  # noqa: E402

CONFIGS = HERE.parents[1] / "config"
CASES = 50
_rng = random.Random("issue40-config")
SEEDS = [(("sim.yaml", "hil.yaml")[k % 2], _rng.randrange(2 ** 32)) for k in range(CASES)]


@pytest.mark.parametrize("name, seed", SEEDS, ids=[f"{n}-{k}" for k, (n, _) in enumerate(SEEDS)])
def test_a_mutated_configuration_is_read_or_refused_naming_the_file(tmp_path, name, seed):
    path = tmp_path / name
    path.write_bytes(mutate((CONFIGS / name).read_bytes(), random.Random(seed)))
    try:
        load_config(path)
    except ConfigError as e:
        assert str(e).startswith(str(path)), str(e)


def test_a_configuration_that_is_not_utf8_is_one_line_exit_2(tmp_path, capsys):
    """(It was a UnicodeDecodeError traceback.)"""
    from mbsim_ros.cli import main
    path = tmp_path / "sim.yaml"
    path.write_bytes(b"dt: 0.001\nnamespace: caf\xe9\n")
    assert main(["run", "--config", str(path), "--transport", "none"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"mbsim: {path}: byte 24 is not UTF-8"), err
