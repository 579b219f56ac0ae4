"""Bring-up of m3-agent-ros and the `m3` command line."""
