"""What a ``typing.Protocol`` asks of an implementation, for tests that check a class against it."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["protocol_methods"]


def protocol_methods(protocol: type) -> dict[str, Callable[..., object]]:
    """Every public method of ``protocol`` and of the protocols it extends (``Store`` combines roles)."""
    methods: dict[str, Callable[..., object]] = {}
    for base in reversed(protocol.__mro__):
        if getattr(base, "_is_protocol", False):
            methods.update({n: m for n, m in vars(base).items() if callable(m) and not n.startswith("_")})
    return methods
