"""The plugin's MTEB tasks. ``TASKS`` lists every task class; registration with mteb reads it."""

from __future__ import annotations

TASKS: list[type] = []
