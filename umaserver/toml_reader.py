"""Reading one TOML table of settings: typed keys taken one by one, every problem recorded (one
line each, naming its place) instead of stopping at the first, unknown keys refused at the end."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class TableReader:
    """Takes keys out of one TOML table, recording every problem instead of stopping at the first."""

    def __init__(self, table: dict[str, Any], where: str, errors: list[str]) -> None:
        self.table = dict(table)
        self.where = where
        self.errors = errors

    def _name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def take(
        self,
        key: str,
        kind: type[T],
        default: T | None = None,
        check: Callable[[T], str | None] | None = None,
    ) -> T:
        name = self._name(key)
        if key not in self.table:
            if default is None:
                self.errors.append(f"{name}: missing")
            return default  # type: ignore[return-value]  # errors already make this unusable
        value = self.table.pop(key)
        # bool is an int in Python, but `port = true` is a mistake worth naming.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            self.errors.append(f"{name}: must be {_kind_name(kind)}, not {_toml_type(value)}")
            return default  # type: ignore[return-value]
        if check is not None and (problem := check(value)) is not None:
            self.errors.append(f"{name}: {problem}")
        return value

    def strings(self, key: str, required: bool = False) -> tuple[str, ...]:
        name = self._name(key)
        if key not in self.table:
            if required:
                self.errors.append(f"{name}: missing")
            return ()
        value = self.table.pop(key)
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.errors.append(f"{name}: must be an array of non-empty strings")
            return ()
        if not value:  # leave the key out for the default; an empty list says nothing clear
            self.errors.append(f"{name}: must not be empty")
        return tuple(value)

    def string_map(self, key: str) -> dict[str, str]:
        """A table of non-empty strings by non-empty keys (`key = {"a" = "b"}`)."""
        name = self._name(key)
        value = self.table.pop(key, {})
        if not isinstance(value, dict) or not all(
            isinstance(v, str) and v and k for k, v in value.items()
        ):
            self.errors.append(f"{name}: must be a table of non-empty strings")
            return {}
        return dict(value)

    def tables(self, key: str) -> list[TableReader]:
        """An array of tables (`[[key]]`), one reader each."""
        value = self.table.pop(key, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            self.errors.append(f"{self._name(key)}: must be an array of tables ([[{key}]])")
            return []
        return [
            TableReader(item, f"{self._name(key)}[{i}]", self.errors)
            for i, item in enumerate(value)
        ]

    def section(self, key: str) -> TableReader:
        value = self.table.pop(key, {})
        if not isinstance(value, dict):
            self.errors.append(f"{self._name(key)}: must be a table, not {_toml_type(value)}")
            value = {}
        return TableReader(value, self._name(key), self.errors)

    def finish(self) -> None:
        for key in sorted(self.table):
            self.errors.append(f"{self._name(key)}: unknown key")


def _kind_name(kind: type) -> str:
    return {str: "a string", int: "an integer", bool: "true or false", list: "an array"}.get(
        kind, kind.__name__
    )


def _toml_type(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    return {
        str: "a string",
        int: "an integer",
        float: "a float",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)


def positive(value: int) -> str | None:
    return None if value > 0 else "must be greater than 0"


def valid_port(value: int) -> str | None:
    return None if 0 < value < 65536 else "must be between 1 and 65535"


def non_empty(value: str) -> str | None:
    return None if value.strip() else "must not be empty"


def toml_string(text: str) -> str:
    """`text` as a TOML basic string, for the files the server writes (dev's config, `db export`):
    a JSON string is one, but for DEL, which TOML wants escaped."""
    return json.dumps(text).replace("\x7f", "\\u007f")
