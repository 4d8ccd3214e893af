"""URDF: reading (urdf_reader.py, file -> Model) and writing (urdf_writer.py, Model -> URDF
text for /robot_description). The names callers import, from one place."""
from .urdf_reader import UNLIMITED, load_urdf, resolve_mesh_uri
from .urdf_writer import capsule_mesh, cone_mesh, joint_frame_links, mesh_file_missing, missing_meshes, to_urdf

__all__ = ["UNLIMITED", "load_urdf", "resolve_mesh_uri", "capsule_mesh", "cone_mesh", "joint_frame_links",
           "mesh_file_missing", "missing_meshes", "to_urdf"]
