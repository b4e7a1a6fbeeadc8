"""Thin wiring of synopsis into agent frameworks, each module behind its own extra.

Import the module you need; nothing here imports a framework. See ``docs/`` for one page per
framework.
"""
