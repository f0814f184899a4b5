"""Test and benchmark helpers that ship with rearank (fake servers for measuring clients)."""
