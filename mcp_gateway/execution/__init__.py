"""Executing HTTP-like actions: arguments onto the wire, one guarded exchange, a capped answer.

``build_request`` places arguments (no credentials); ``send`` applies the auth at the last moment,
follows same-origin redirects only and maps failures to ``UpstreamError``; ``read_response``
shapes the body within a byte budget; ``summarize_error`` extracts the upstream's reason.
"""

from __future__ import annotations

from .http_request import build_request
from .response import Outcome, read_response, said, summarize_error
from .send import send

__all__ = ["Outcome", "build_request", "read_response", "said", "send", "summarize_error"]
