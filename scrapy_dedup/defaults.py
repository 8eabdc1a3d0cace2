"""Every scrapy-dedup setting and its default, in one place.

Components read a setting with ``settings.getbool(name)``, ``getdict(name,
DEFAULTS[name])`` and the like, so a user who does not mention a name gets the
default written here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULTS"]

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
