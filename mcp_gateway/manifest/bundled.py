"""The data shipped inside the package: the catalog (``bundled/catalog/<name>.yaml`` and their specs)
and the manifests (``bundled/manifests/default.yaml``, ``example.yaml``).

They are package data, found through ``importlib.resources`` wherever the package is installed (a
checkout, ``pip install .``, a wheel, pipx, ``uv tool``). The loader reads catalog entries as a folder
and resolves their spec paths against it, so the package must be installed as files (every installer
above does so); a zipped import is refused with a clear message instead of failing later.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["BUNDLED_DIR", "CATALOG_DIR", "DEFAULT_MANIFEST", "EXAMPLE_MANIFEST"]


def _bundled_dir() -> Path:
    root = files("mcp_gateway") / "bundled"
    if not isinstance(root, Path):
        raise ImportError(f"mcp_gateway's bundled data is not a folder ({root!r}): install the package unzipped")
    return root


BUNDLED_DIR = _bundled_dir()
CATALOG_DIR = BUNDLED_DIR / "catalog"
DEFAULT_MANIFEST = BUNDLED_DIR / "manifests" / "default.yaml"
EXAMPLE_MANIFEST = BUNDLED_DIR / "manifests" / "example.yaml"
