"""``Settings`` and the on/off environment variables: one reading, one refusal of anything else."""

from __future__ import annotations

import pytest

from mcp_gateway.vocabulary.settings import (
    FAST_PATHS_SWITCH,
    SWITCHES,
    check_switches,
    fast_paths_switched_on,
    switch,
)


@pytest.mark.parametrize(
    ("value", "on"),
    [("1", True), ("0", False), ("true", True), ("False", False), (" yes ", True), ("off", False), ("", True)],
)
def test_a_switch_takes_the_usual_spellings_of_on_and_off(value: str, on: bool) -> None:
    assert switch(FAST_PATHS_SWITCH, {FAST_PATHS_SWITCH: value}) is on
    assert fast_paths_switched_on({FAST_PATHS_SWITCH: value}) is on


def test_an_unset_switch_is_its_default() -> None:
    assert all(switch(name, {}) is default for name, default in SWITCHES.items())


@pytest.mark.parametrize("value", ["maybe", "2", "enabled", "\x1b[2J"])
def test_any_other_value_is_refused_naming_the_variable_and_what_it_takes(value: str) -> None:
    for name in SWITCHES:
        with pytest.raises(ValueError, match=rf"\${name} must be 1 or 0 \(or true/false, yes/no, on/off\)"):
            check_switches({name: value})
