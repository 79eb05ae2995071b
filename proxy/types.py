"""Shared type aliases (wire messages are plain JSON, so they are typed loosely here) and
`frozen`, the decorator of the proxy's value classes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar, dataclass_transform, overload

JSONObject: TypeAlias = dict[str, Any]
Message: TypeAlias = dict[str, Any]

_T = TypeVar("_T")


@overload
def frozen(cls: type[_T], /) -> type[_T]: ...


@overload
def frozen(*, slots: bool = False) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def frozen(cls: type[_T] | None = None, /, *, slots: bool = False) -> Any:
    """A dataclass that is frozen to the type checker and hashable by its fields.

    At run time its fields are plain attributes: `dataclass(frozen=True)` sets each one through
    `object.__setattr__`, about 90 ns a field, and a managed turn builds some 30 of these
    objects (about 230 fields): 5-10% of a warm turn's CPU. `mypy --strict` refuses any
    assignment to a field, as it does for a frozen dataclass; `dataclasses.replace` makes a
    changed copy."""

    def wrap(c: type[_T]) -> type[_T]:
        return dataclass(unsafe_hash=True, slots=slots)(c)

    return wrap if cls is None else wrap(cls)
