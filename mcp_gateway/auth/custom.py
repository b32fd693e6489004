"""``custom``: header templates, ``{secret}`` for a plain secret or ``{secret.field}`` for a JSON one."""

from __future__ import annotations

import re

import httpx2

from ..manifest import CustomAuth
from ..primitives.secrets import SecretValue
from ..vocabulary.errors import CredentialError
from ._base import check_header_value

__all__ = ["apply_custom", "render_secret_template"]

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


def apply_custom(request: httpx2.Request, config: CustomAuth, secret: SecretValue) -> None:
    for name, template in config.headers.items():
        rendered = render_secret_template(template, secret, what="a custom header template")
        request.headers[name] = check_header_value("custom", f"header {name!r}", rendered)
