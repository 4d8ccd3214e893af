"""The clone's own folder, when it is named mbsim_ros and a script runs from the folder holding
it: Python would import this folder as an empty namespace package (mb.load_model an
AttributeError). This file makes the folder stand for the package inside it instead."""
import importlib.util
import os
import sys

if __name__ == "mbsim_ros":
    _inner = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mbsim_ros")
    _spec = importlib.util.spec_from_file_location(
        __name__, os.path.join(_inner, "__init__.py"), submodule_search_locations=[_inner])
    _package = importlib.util.module_from_spec(_spec)
    sys.modules[__name__] = _package      # `import mbsim_ros` hands back what sys.modules holds
    _spec.loader.exec_module(_package)
