"""Bundled catalog of Karta definitions (package data)."""
