"""Jinja2 prompt templates, packaged with reviewbot (see reviewbot/prompts.py)."""
