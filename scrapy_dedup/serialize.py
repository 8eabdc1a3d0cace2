"""Requests as JSON, for the frontier of a store that outlives the run.

Requests are kept as ``Request.to_dict`` gives them: callbacks by name, meta
and ``cb_kwargs`` values that JSON can hold. Nothing is unpickled or imported
from what is read back.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from scrapy import Request
from scrapy.utils.request import request_from_dict

__all__ = ["request_from_json", "request_to_json"]


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"__bytes__": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(type(value).__name__)


def _unjson(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__bytes__"}:
            return base64.b64decode(value["__bytes__"])
        return {k: _unjson(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unjson(v) for v in value]
    return value


def request_to_json(request: Request, spider: Any) -> tuple[str | None, bool]:
    """``(JSON, simplified)``: the request as ``Request.to_dict`` gives it,
    without its class (always rebuilt as a plain ``Request``); meta and
    ``cb_kwargs`` entries JSON cannot hold are left out (``simplified``).
    ``None`` for a request whose callback is not a spider method: it could
    only come back with the wrong callback."""
    try:
        data = request.to_dict(spider=spider)
    except ValueError:
        return None, True
    simplified = False
    data.pop("_class", None)
    data["headers"] = {
        key.decode("latin-1"): [value.decode("latin-1") for value in values]
        for key, values in (data.get("headers") or {}).items()
    }
    for name in ("meta", "cb_kwargs"):
        kept = {}
        for key, value in (data.get(name) or {}).items():
            try:
                kept[key] = _jsonable(value)
            except TypeError:
                simplified = True
        data[name] = kept
    for name, value in list(data.items()):
        if name not in ("meta", "cb_kwargs"):
            try:
                data[name] = _jsonable(value)
            except TypeError:
                data.pop(name)
                simplified = True
    return json.dumps(data, separators=(",", ":")), simplified


def request_from_json(text: str, spider: Any) -> Request | None:
    """The request :func:`request_to_json` wrote; ``None`` when it cannot be
    rebuilt (a callback the spider no longer has)."""
    try:
        data = _unjson(json.loads(text))
        data.pop("_class", None)
        return request_from_dict(data, spider=spider)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
