"""Jinja2 prompt templates, packaged with reviewbot (see reviewbot/prompts.py).

Owns: nothing but the package, so the templates ship inside reviewbot. Must not: hold code
(`reviewbot.prompts` renders the templates).
"""
