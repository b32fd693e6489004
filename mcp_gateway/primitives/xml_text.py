"""An upstream's XML read as a small element tree, without ever honouring a DTD.

Error bodies of AWS, Azure Storage and SOAP services are XML; what they say sits in a few named
elements (``Code``, ``Message``, ``faultstring``) behind the namespace boilerplate. The text is
untrusted, so it is read with expat directly and refused outright when it declares a document type:
no internal entity can be defined (no "billion laughs"), no external one fetched, and a reference to
an undefined entity is a parse error. What cannot be read so is no tree (``None``); ``tag_text``
then gives its text with the markup taken out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final
from xml.parsers import expat

__all__ = ["Element", "looks_like_xml", "parse_xml", "tag_text"]

MAX_ELEMENTS: Final = 2000
"""More elements than an error needs: such a document is read as text instead of walked."""
_TAG: Final = re.compile(r"<[^>]*>")
_XML_TYPES: Final = ("xml",)


@dataclass
class Element:
    """One element: its local name (namespace dropped), its own text and its children."""

    name: str
    text: str = ""
    children: list[Element] = field(default_factory=lambda: [])

    def child(self, name: str) -> Element | None:
        """The first child named ``name`` (case-insensitively)."""
        name = name.lower()
        return next((c for c in self.children if c.name.lower() == name), None)

    def find_all(self, name: str) -> list[Element]:
        """Every element under this one (itself included) named ``name`` (case-insensitively), in order."""
        name = name.lower()
        found: list[Element] = []
        stack: list[Element] = [self]
        while stack:
            node = stack.pop()
            if node.name.lower() == name:
                found.append(node)
            stack.extend(reversed(node.children))
        return found

    def all_text(self) -> str:
        """The text of this element and everything under it, one space between runs."""
        parts: list[str] = []
        stack: list[Element] = [self]
        while stack:
            node = stack.pop()
            if node.text:
                parts.append(node.text)
            stack.extend(reversed(node.children))
        return " ".join(" ".join(parts).split())


class _Refused(Exception):
    """The document declares a DTD or entities, or is too big to walk."""


def looks_like_xml(text: str, media_type: str = "") -> bool:
    """Labelled XML (``application/xml``, ``text/xml``, ``application/soap+xml``), or opening with a declaration."""
    return media_type.endswith(_XML_TYPES) or text.lstrip().startswith("<?xml")


def parse_xml(text: str) -> Element | None:
    """``text``'s root element; None when it is no well-formed XML, declares a document type or
    entities, or has more than ``MAX_ELEMENTS`` elements."""
    parser = expat.ParserCreate("utf-8", namespace_separator="}")  # str in: its declared encoding is moot
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[Element] = []
    root: list[Element] = []
    count = 0

    def refuse(*_: object) -> None:
        raise _Refused

    def refuse_entity(*_: object) -> int:
        raise _Refused

    def start(name: str, _attributes: object) -> None:
        nonlocal count
        count += 1
        if count > MAX_ELEMENTS:
            raise _Refused
        element = Element(name.rpartition("}")[2])
        (stack[-1].children if stack else root).append(element)
        stack.append(element)

    def end(_name: str) -> None:
        element = stack.pop()
        element.text = " ".join(element.text.split())

    def characters(data: str) -> None:
        if stack:
            stack[-1].text += data

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse_entity
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = characters
    try:
        parser.Parse(text, True)
    except (expat.ExpatError, _Refused, ValueError):
        return None
    return root[0] if root else None


def tag_text(text: str) -> str:
    """``text`` with every tag (and declaration, comment, CDATA marker) taken out, whitespace collapsed."""
    return " ".join(_TAG.sub(" ", text).split())
