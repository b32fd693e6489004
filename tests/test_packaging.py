"""Ready to publish: the version is written once (``mcp_gateway/__init__.py``), and the project's
metadata says what a package index shows (classifiers, the licence, the readme)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import mcp_gateway

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_written_in_one_place() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    dynamic = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["dynamic"]
    assert dynamic["version"] == {"attr": "mcp_gateway.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+([ab]|rc)?\d*", mcp_gateway.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {mcp_gateway.__version__} " in changelog  # the release it describes


def test_the_metadata_an_index_shows() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "mcp-action-gateway"
    assert project["license"] == "MIT" and project["readme"] == "README.md"
    classifiers = project["classifiers"]
    assert "Typing :: Typed" in classifiers and "Programming Language :: Python :: 3.11" in classifiers
    assert not any(c.startswith("License ::") for c in classifiers)  # the SPDX expression says it


def test_the_licence_text_ships_beside_its_expression() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")
