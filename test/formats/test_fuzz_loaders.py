"""Bad bytes (issue 19): every loader turns mutated files (invalid UTF-8, numbers out of range,
bytes flipped, spans cut or repeated) into a ModelError naming the file, or loads them; never
another exception, never a hang. A fixed seed, 80 cases per format over our own models of each format (SDFormat: ours and
Gazebo's example worlds)."""
import pathlib
import random
import shutil
import warnings

import pytest

import mbsim_ros as mb
from mbsim_ros import ModelError
from test_vrml import deadline

OWN = pathlib.Path(__file__).resolve().parents[1] / "models"
FORMATS = {"openhrp": "*.wrl", "urdf": "*.urdf", "opensim": "*.osim", "chrono_yaml": "*.yaml", "sdf": "*.sdf",
           "sdf/gazebo": "*.sdf", "mjcf": "*.xml"}
CASES_PER_FORMAT = 80
HANG_GUARD = 20.0       # s per case: far above any load here (a guard against hangs, not a timing)

# what the field sends: undecodable bytes, integers beyond a C long, floats beyond a double,
# control bytes, unbalanced brackets and quotes
INSERTS = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x00", b"\x1b", b"99999999999999999999999999",
           b"-18446744073709551617", b"1e999", b"-1e400", b"nan", b"inf", b"[", b"]", b"{", b"}", b"\"",
           b"<", b">", b"&", b":", b"- ", b"\n  ", b"&bogus;", b"0x1p99999"]


def mutate(data: bytes, rng: random.Random) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(5)
        at = rng.randrange(len(data) + 1)
        if kind == 0:                                  # insert a nasty token
            data[at:at] = rng.choice(INSERTS)
        elif kind == 1 and len(data):                  # flip a byte
            data[min(at, len(data) - 1)] = rng.randrange(256)
        elif kind == 2:                                # cut a span
            del data[at:at + rng.randint(1, 64)]
        elif kind == 3:                                # repeat a span
            data[at:at] = data[at:at + rng.randint(1, 64)]
        else:                                          # replace a digit run by a huge number
            while at < len(data) and not chr(data[at]).isdigit():
                at += 1
            end = at
            while end < len(data) and chr(data[end]).isdigit():
                end += 1
            data[at:end] = rng.choice([b"9" * 40, b"1e99999", b"-" + b"9" * 25])
    return bytes(data)


def _cases():
    out = []
    for folder, pattern in FORMATS.items():
        files = sorted((OWN / folder).glob(pattern))
        rng = random.Random(f"issue19-{folder}")     # fixed seed per format
        for k in range(CASES_PER_FORMAT):
            out.append(pytest.param(folder, files[k % len(files)].name, rng.randrange(2 ** 32), id=f"{folder}-{k}"))
    return out


@pytest.fixture(scope="module")
def models_copy(tmp_path_factory):
    """A copy of test/models (meshes, Inline parts and Geometry folders beside each file)."""
    root = tmp_path_factory.mktemp("fuzz")
    shutil.copytree(OWN, root / "models")
    return root / "models"


@pytest.mark.parametrize("folder, name, seed", _cases())
def test_mutated_file_loads_or_raises_model_error(models_copy, folder, name, seed):
    original = (OWN / folder / name).read_bytes()
    path = models_copy / folder / name
    path.write_bytes(mutate(original, random.Random(seed)))
    try:
        with deadline(HANG_GUARD), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mb.load_model(path)
    except ModelError as exc:
        assert str(exc).startswith(str(path)), f"the message does not start with the file: {exc}"
    finally:
        path.write_bytes(original)
