"""What fuzzed `mbsim` command lines found (test/cli_fuzz.py; `python bench/fuzz.py --formats
cli` runs the campaign), each as a plain call of `mbsim_ros.cli.main`: one line and exit 2."""
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _main(capsys, *argv):
    from mbsim_ros.cli import main
    try:
        rc = main(list(argv))
    except SystemExit as e:
        rc = e.code
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


CART = HERE / "batch" / "models" / "cart.wrl"


@pytest.mark.parametrize("argv, said", [
    # getaddrinfo's IDNA encoding raised UnicodeError (a traceback) for these hosts
    (["run", str(CART), "--view", "--view-host", "\udcff\udcfe", "--duration", "0.01"], "--view-host"),
    (["run", str(CART), "--view", "--view-host", "a" * 5000, "--duration", "0.01"], "--view-host"),
    # a field of view so narrow that framing the world overflowed: a ValueError traceback
    (["render", str(CART), "-o", "x.png", "--fov", "1e-300"], "--fov 1e-300"),
    # empty lists that silently meant "all"
    (["plot", "bag", "-o", "p.png", "--joints", ""], "--joints ''"),
    (["export", "bag", "--csv", "c", "--topics", ","], "--topics ','"),
    # a local cluster of 10^23 worker processes was started
    (["batch", "spec.yaml", "--workers", "99999999999999999999999"], "--workers 99999999999999999999999"),
])
def test_what_the_cli_fuzz_found_is_one_line_exit_2(tmp_path, monkeypatch, capsys, argv, said):
    monkeypatch.chdir(tmp_path)
    if argv[0] == "batch":
        pytest.importorskip("distributed")
    rc, out, err = _main(capsys, *argv)
    assert rc == 2 and err.count("\n") == 1 and err.startswith("mbsim") and said in err, err


def test_render_of_a_camera_named_empty_is_refused_not_the_default_view(tmp_path, monkeypatch, capsys):
    """--camera '' drew the default view (an empty name read as no option)."""
    monkeypatch.chdir(tmp_path)
    rc, out, err = _main(capsys, "render", str(CART), "-o", "x.png", "--width", "8", "--height", "8", "--camera", "")
    assert rc == 2 and "no camera named ''" in err.strip().splitlines()[-1], err
    assert not (tmp_path / "x.png").exists()


def test_an_output_path_that_is_not_utf8_is_written_and_named(tmp_path, monkeypatch, capfdbinary):
    """`mbsim convert M -o <bytes not UTF-8>.urdf` wrote the file, then its "wrote ..." line
    raised UnicodeEncodeError on a UTF-8 terminal (a traceback, exit 1); now the line carries
    the name's own bytes."""
    import os
    from mbsim_ros.cli import main
    monkeypatch.chdir(tmp_path)
    name = os.fsdecode(b"r\xff.urdf")
    assert main(["convert", str(CART), "-o", name]) == 0
    assert (tmp_path / name).is_file()
    assert b"wrote r\xff.urdf" in capfdbinary.readouterr().out
