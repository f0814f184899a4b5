"""Test and benchmark helpers that ship with rearank (fake servers for measuring clients, a free local port)."""
