"""Every scrapy-dedup setting and its default, in one place.

Settings are read through :func:`get` so a component gets the default even
when the user's settings do not mention the name.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULTS", "get"]

DEFAULTS: dict[str, Any] = {
    # URL stage (CanonicalDupeFilter)
    "DEDUP_URL_RULES": {},  # {rule name: bool}; every rule is on unless set to False
    "DEDUP_URL_STRIP_PARAMS": [],  # extra query parameter names to strip everywhere
    "DEDUP_URL_KEEP_PARAMS": [],  # names never stripped (overrides the built-in list)
    # {host: {rule: bool, "strip_params": [...], "keep_params": [...]}}
    "DEDUP_URL_HOST_RULES": {},
    # Logging
    "DEDUP_DEBUG": False,  # log every dropped request/item with the reason
}


def get(settings: Any, name: str) -> Any:
    """The value of setting ``name`` (a ``scrapy.settings.Settings``), or its default."""
    value = settings.get(name)
    if value is None:
        return DEFAULTS[name]
    if hasattr(value, "copy_to_dict"):  # a BaseSettings given for a dict setting
        return value.copy_to_dict()
    return value
