"""Group/version/kind: how Kubernetes names a kind of object."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from webhook.base.limits import GVK_CACHE_ENTRIES, GVK_CACHE_TEXT


class GVKLike(Protocol):
    """Anything with a group, a version and a kind (a :class:`GVK`, a definition's kind)."""

    @property
    def group(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def kind(self) -> str: ...


class GVK(NamedTuple):
    """A group/version/kind; the core group is the empty string. A named tuple: every request
    hashes one to look up its definition, and a tuple's hash and equality are the
    interpreter's own, not Python methods."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @classmethod
    def of(cls, obj: Any) -> GVK | None:
        """The GVK of a Kubernetes object from its ``apiVersion`` and ``kind``."""
        if type(obj) is not dict and not isinstance(obj, Mapping):
            return None
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str) or not kind:
            return None
        if len(api_version) + len(kind) > GVK_CACHE_TEXT:
            return _parse(api_version, kind)
        return _parsed(api_version, kind)

    def __str__(self) -> str:
        return f"{self.group}/{self.version} {self.kind}"


def _parse(api_version: str, kind: str) -> GVK:
    group, _, version = api_version.rpartition("/")
    return GVK(group, version, kind)


#: every request asks, for a few kinds: the answers are kept (bounded in number and size)
_parsed = functools.lru_cache(maxsize=GVK_CACHE_ENTRIES)(_parse)
