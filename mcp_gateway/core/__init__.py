"""The gateway core (issue 10)."""
