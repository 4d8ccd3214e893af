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
    ".sdf": ("sdf", "load_sdf"),
    ".world": ("sdf", "load_sdf"),
}


def load_model(path, floating_base=None, xacro_args=None, **options) -> Model:
    """Load a model file; the format comes from the extension, or the content: a <mujoco> root
    is MJCF (formats/mjcf), a .xml with <robot> is URDF, one with <sdf> SDFormat (formats/sdf).

    A URDF's root link floats (a free joint named `root_joint`) unless the file welds it to a
    link named "world", as Gazebo places a URDF; floating_base=True or False overrides that.
    Formats that declare their root joint ignore floating_base. A .xacro file is
    expanded by the `xacro` package with `xacro_args` ({name: value}, as name:=value on xacro's
    command line) and read as URDF.
    """
    path = os.fsdecode(path)         # bytes (a non-UTF-8 name) as the str the OS functions take back
    if os.path.isdir(path):
        raise ModelError(f"{path}: a directory, not a model file; expected a file ending in "
                         f"{', '.join(sorted([*_LOADERS, '.xacro']))}")
    if not os.path.isfile(path):
        raise ModelError(f"{path}: no such model file")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".xacro":
        from .urdf import load_urdf
        return load_urdf(path, floating_base=floating_base, text=expand_xacro(path, xacro_args), **options)
    if xacro_args:
        raise ModelError(f"{path}: xacro arguments ({', '.join(f'{k}:={v}' for k, v in xacro_args.items())}) "
                         "given for a file that is not .xacro")
    from .mjcf import is_mjcf
    with open(path, "rb") as f:
        head = f.read(4096)
        mjcf = is_mjcf(head)      # MJCF by its <mujoco> root, whatever the extension
        text = head + f.read() if mjcf else None        # (read once: the loader parses these bytes)
    if mjcf:
        from .mjcf import load_mjcf
        return load_mjcf(path, floating_base=floating_base, text=text, **options)
    if ext == ".xml":
        ext = ".urdf" if b"<robot" in head else ".sdf" if b"<sdf" in head else ext
    if ext not in _LOADERS:
        raise ModelError(f"{path}: unknown model format {ext!r}; expected one of {', '.join(sorted([*_LOADERS, '.xacro']))} or an MJCF file (<mujoco> root)")
    module_name, func_name = _LOADERS[ext]
    import importlib
    module = importlib.import_module(f"{__name__}.{module_name}")
    return getattr(module, func_name)(path, floating_base=floating_base, **options)


def is_mjcf_file(path) -> bool:
    """Whether the file opens a <mujoco> document (MJCF, whatever its extension)."""
    from .mjcf import is_mjcf
    try:
        with open(path, "rb") as f:
            return is_mjcf(f.read(4096))
    except OSError:
        return False


def expand_xacro(path, args=None) -> str:
    """The URDF text of a .xacro file expanded with arguments {name: value}; ModelError naming the
    file and xacro's complaint when it does not expand."""
    try:
        import xacro
    except ImportError:
        raise ModelError(f"{path}: expanding xacro needs the xacro package (pip install xacro)") from None
    mappings = {str(k): str(v) for k, v in (args or {}).items()}
    try:
        doc = xacro.process_file(os.fspath(path), mappings=mappings)
    except Exception as e:   # xacro raises XacroException, XML and name errors for bad input
        raise ModelError(f"{path}: xacro could not expand it: {e}") from None
    return doc.toxml()


def load_description(text, source: str = "robot_description", floating_base=None) -> Model:
    """A Model from URDF text (a robot_description parameter or topic); `source` names it in
    messages, relative mesh paths start from the current folder."""
    from .urdf import load_urdf
    if not isinstance(text, str) or not text.strip():
        raise ModelError(f"{source}: empty; expected URDF text")
    return load_urdf(source.strip("/").replace("/", "_") or "robot_description", floating_base=floating_base, text=text)


def to_urdf(model: Model, **options) -> str:
    """URDF text for any Model (see formats/urdf.py for how non-URDF joint types are written)."""
    from .urdf import to_urdf as _to_urdf
    return _to_urdf(model, **options)
