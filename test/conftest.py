"""Shared test fixtures: where the real model files live and where our own small models live."""
import os
import pathlib

import pytest

HERE = pathlib.Path(__file__).resolve().parent
OWN_MODELS = HERE / "models"
SHARED_MODELS = pathlib.Path(os.environ.get(
    "MBSIM_SHARED_MODELS", HERE.parent.parent / "shared" / "models")).resolve()


def shared_model(*parts) -> pathlib.Path:
    """Path to a model in ../shared/models; skips the test (with the reason) where absent."""
    path = SHARED_MODELS.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared model files (../shared/models) are not beside this checkout")
    return path


def shared_models(subdir, pattern):
    """All matching shared model paths, for parametrizing; empty where ../shared is absent."""
    folder = SHARED_MODELS / subdir
    return sorted(folder.glob(pattern)) if folder.is_dir() else []
