"""text ops."""

from __future__ import annotations
