"""``custom``: header templates, ``{secret}`` for a plain secret or ``{secret.field}`` for a JSON one."""

from __future__ import annotations

import re
from collections.abc import Iterable

import httpx2

from ..manifest import CustomAuth
from ..primitives.secrets import SecretValue
from ..vocabulary.errors import CredentialError, StoredSecretMisfit
from ._base import check_header_value

__all__ = ["apply_custom", "render_secret_template", "stored_misfit", "template_fields", "template_misfit"]

# Only these placeholders are special; any other brace in a template is literal text.
_PLACEHOLDER = re.compile(r"\{secret(?:\.([^{}]+))?\}")


def render_secret_template(template: str, secret: SecretValue | None, *, what: str) -> str:
    """Fill ``{secret}`` / ``{secret.field}`` in ``template``; ``what`` names the template in errors
    (``"a custom header template"``). Shared by custom auth headers and MCP stdio env values."""
    value = secret.reveal() if secret is not None else None

    def substitute(m: re.Match[str]) -> str:
        field = m.group(1)
        if field is None:
            if not isinstance(value, str):
                raise CredentialError(
                    f"{what} uses {{secret}}, but the stored secret is a JSON object; "
                    "use {secret.<field>} in the template, or store a plain string"
                )
            return value
        if not isinstance(value, dict):
            raise CredentialError(
                f"{what} uses {{secret.{field}}}, but the stored secret is a plain string; "
                "store a JSON object with that field, or use {secret}"
            )
        if field not in value:
            raise CredentialError(
                f"{what} uses {{secret.{field}}}, but the stored secret has no field {field!r}; "
                "add it with `mcp-gateway secret set`, or fix the template"
            )
        return value[field]

    return _PLACEHOLDER.sub(substitute, template)


def template_fields(templates: Iterable[str]) -> tuple[list[str], bool]:
    """The ``{secret.<field>}`` fields ``templates`` use (in order, once each), and whether any uses the
    whole ``{secret}``."""
    fields: dict[str, None] = {}
    whole = False
    for template in templates:
        for m in _PLACEHOLDER.finditer(template):
            if m.group(1) is None:
                whole = True
            else:
                fields[m.group(1)] = None
    return list(fields), whole


def template_misfit(config: CustomAuth, value: str | dict[str, str]) -> str | None:
    """Why ``value`` cannot fill ``config``'s header templates, naming the fields (never a value); None
    when it can."""
    fields, whole = template_fields(config.headers.values())
    if fields and whole:
        return (
            "This connector's header templates use both {secret} and {secret.<field>}, which no one value fills; "
            "the operator should fix the manifest's auth headers."
        )
    if whole:
        if isinstance(value, dict):
            return "This connector's header templates use the whole secret ({secret}): enter one plain value."
        return None
    wanted = ", ".join(repr(f) for f in fields)
    if not isinstance(value, dict):
        return f"This connector's header templates use the fields {wanted} of a JSON object: enter each of them."
    missing = [f for f in fields if not value.get(f)]
    if missing:
        return f"Missing {', '.join(repr(f) for f in missing)}: this connector's header templates use {wanted}."
    return None


def stored_misfit(config: CustomAuth, value: str | dict[str, str]) -> str | None:
    """What a stored ``value`` lacks to fill ``config``'s header templates, naming fields (never a value);
    None when it can fill them, or when only the manifest could be at fault (``template_misfit`` says so)."""
    fields, whole = template_fields(config.headers.values())
    if fields and whole:
        return None
    if whole:
        if isinstance(value, dict):
            return (
                "The stored credential is a JSON object, but this connector's header templates use one plain "
                "value ({secret})."
            )
        return None
    wanted = ", ".join(repr(f) for f in fields)
    if not isinstance(value, dict):
        return (
            "The stored credential is one plain value, but this connector's header templates use the fields "
            f"{wanted} of a JSON object."
        )
    missing = [f for f in fields if not value.get(f)]
    if missing:
        lacks = ", ".join(repr(f) for f in missing)
        plural = "s" if len(missing) > 1 else ""
        return (
            f"The stored credential has no value for the field{plural} {lacks} "
            f"(this connector's header templates use {wanted})."
        )
    return None


def apply_custom(request: httpx2.Request, config: CustomAuth, secret: SecretValue) -> None:
    if problem := stored_misfit(config, secret.reveal()):
        raise StoredSecretMisfit(problem)
    for name, template in config.headers.items():
        rendered = render_secret_template(template, secret, what="a custom header template")
        request.headers[name] = check_header_value("custom", f"header {name!r}", rendered)
