"""Model file readers (file -> Model) and the URDF writer (Model -> URDF). Import only model/."""
import os

from ..model import Model, ModelError

# extension -> (module, loader function name)
_LOADERS = {
    ".urdf": ("urdf", "load_urdf"),
    ".wrl": ("openhrp", "load_openhrp"),
    ".osim": ("opensim", "load_opensim"),
    ".yaml": ("chrono_yaml", "load_chrono_yaml"),
    ".yml": ("chrono_yaml", "load_chrono_yaml"),
}


def load_model(path, floating_base: bool = False, **options) -> Model:
    """Load a model file; the format comes from the extension (or, for .xml, the content).

    floating_base=True puts a free joint named `root_joint` above a URDF's root link (URDF
    cannot say so itself); formats that declare their root joint ignore it.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ModelError(f"{path}: a directory, not a model file; expected a file ending in "
                         f"{', '.join(sorted(_LOADERS))}")
    if not os.path.isfile(path):
        raise ModelError(f"{path}: no such model file")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".xml":
        with open(path, "rb") as f:
            head = f.read(4096)
        ext = ".urdf" if b"<robot" in head else ext
    if ext not in _LOADERS:
        raise ModelError(f"{path}: unknown model format {ext!r}; expected one of {', '.join(sorted(_LOADERS))}")
    module_name, func_name = _LOADERS[ext]
    import importlib
    module = importlib.import_module(f"{__name__}.{module_name}")
    return getattr(module, func_name)(path, floating_base=floating_base, **options)


def to_urdf(model: Model, **options) -> str:
    """URDF text for any Model (see formats/urdf.py for how non-URDF joint types are written)."""
    from .urdf import to_urdf as _to_urdf
    return _to_urdf(model, **options)
