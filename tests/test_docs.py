"""The README and the pages under docs/: the README stays a first page, and no link between them is broken."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC_PAGES = sorted((ROOT / "docs").glob("*.md"))
LINKED_FILES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *DOC_PAGES]
_LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)")


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as dashes."""
    headings = re.findall(r"^#+ (.*)$", page.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_the_readme_is_a_first_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    # CI (.ci/run) runs exactly the test command the README gives; set-up command (a) is what users type.
    assert "python3 -m pip install -e '.[embeddings]' && mcp-gateway serve\n" in readme
    assert "\nbash scripts/test.sh\n" in readme
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for page in DOC_PAGES:  # every page is reachable from the README
        assert f"](docs/{page.name})" in readme, page.name


@pytest.mark.parametrize("source", LINKED_FILES, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_links_reach_a_file_and_heading(source: Path) -> None:
    broken: list[str] = []
    for target, anchor in _LINK.findall(source.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://")):
            continue
        page = (source.parent / target).resolve() if target else source
        if not page.is_file():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in _anchors(page):
            broken.append(f"{target}#{anchor}: no such heading")
    assert not broken, broken


def test_no_page_sends_users_to_another_project() -> None:
    # PyPI's `mcp-gateway` is an unrelated project: the distribution is `mcp-action-gateway`.
    for page in LINKED_FILES:
        text = " ".join(page.read_text(encoding="utf-8").split())
        for match in re.finditer(r"(pip|pipx|uv tool) install mcp-gateway\b", text):
            assert "never" in text[max(0, match.start() - 20) : match.start()], f"{page.name}: {match.group()}"
