"""A normal install can start (issue 14): build the wheel, install it into a fresh virtual environment and
drive ``mcp-gateway serve`` over stdio on the embedded default manifest, from a folder that is not the
checkout. The wheel must carry the bundled catalog, specs and manifests (package data).

The build fetches only its backend (setuptools, through pip's build isolation). The environment sees this
interpreter's site-packages for the dependencies (nothing else is downloaded) through a ``.pth`` line rather
than ``--system-site-packages``: the latter would also run the ``.pth`` hooks of a development install
(``pip install -e``), whose import finder would then serve the checkout instead of the wheel. The test
checks that the package imported is the installed copy.
"""

from __future__ import annotations

import json
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.support.env import child_env

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
MASTER_KEY = "wheel-install-master-key-0123456789abcdef"


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=_clean_env(), timeout=300, check=False
    )
    assert proc.returncode == 0, f"{args}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without what would point the child at the checkout (PYTHONPATH) or other state."""
    keep = child_env()
    keep.pop("PYTHONPATH", None)
    return keep | extra


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a fresh virtual environment with the wheel built from this checkout installed."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"  # a copy, so that building leaves no build/ or egg-info in the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "mcp_gateway", source / "mcp_gateway", ignore=shutil.ignore_patterns("__pycache__"))
    dist = root / "dist"
    # Built as users build it: pip fetches the build backend (setuptools) into an isolated environment.
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, source)
    (wheel,) = dist.glob("*.whl")
    # Our own distribution name: PyPI's `mcp-gateway` is another project.
    assert wheel.name.startswith("mcp_action_gateway-"), wheel.name
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in (
        "mcp_gateway/bundled/manifests/default.yaml",
        "mcp_gateway/bundled/manifests/example.yaml",
        "mcp_gateway/bundled/catalog/github.yaml",
        "mcp_gateway/bundled/catalog/specs/petstore.json",
        "mcp_gateway/server/templates/base.html",
        "mcp_gateway/server/fast/stdio_answers.json",
        "mcp_gateway/py.typed",
    ):
        assert data in names, f"{data} is not in the wheel"

    venv = root / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    purelib = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    (purelib / "host-site-packages.pth").write_text("".join(f"{p}\n" for p in site.getsitepackages()))
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel)
    imported = _run(python, "-c", "import mcp_gateway; print(mcp_gateway.__file__)", cwd=root).strip()
    assert Path(imported).is_relative_to(venv), f"the venv imports {imported}, not the installed wheel"
    return venv / "bin"


def structured(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None, result
    return result.structured_content


def test_the_installed_cli_validates_the_embedded_default(installed: Path, tmp_path: Path) -> None:
    out = _run(installed / "mcp-gateway", "validate", cwd=tmp_path)
    assert "bundled default manifest: ok" in out, out


async def test_the_installed_wheel_serves_the_embedded_default_over_stdio(installed: Path, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=str(installed / "mcp-gateway"),
        args=["serve"],
        env=_clean_env(
            MCP_GATEWAY_STATE_DIR=str(tmp_path / "state"), MCP_GATEWAY_MASTER_KEY=MASTER_KEY, MCP_GATEWAY_FAST_PATHS="1"
        ),
        cwd=tmp_path,
    )
    with (tmp_path / "stderr.log").open("w") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy") as client:
            listed = structured(await client.call_tool("connectors", {}))["connectors"]
            found = structured(await client.call_tool("discover", {"query": "find pets by status"}))
    by_slug = {c["slug"]: c for c in listed}
    assert set(by_slug) == {"github", "petstore"}, listed
    assert all(c["actions"] > 0 for c in listed), listed  # the bundled specs were found and parsed
    assert found["results"] and found["results"][0]["name"].startswith("petstore."), found
    # A new state folder started from the answers shipped for this build: kept there at once, with
    # those for protocol versions this session never asked for.
    kept = json.loads((tmp_path / "state" / "stdio-answers.json").read_text())["answers"]
    assert '["initialize","2024-11-05"]' in kept, sorted(kept)
