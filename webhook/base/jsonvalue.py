"""The type of a decoded JSON value, for signatures whose shape is JSON and nothing more."""

from __future__ import annotations

from typing import TypeAlias

#: A decoded JSON document (what orjson and :mod:`webhook.base.jsontext` give back).
JSON: TypeAlias = dict[str, "JSON"] | list["JSON"] | str | int | float | bool | None
#: A JSON object.
JSONObject: TypeAlias = dict[str, JSON]
