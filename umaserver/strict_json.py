"""The one strict reader for JSON that someone else wrote: request bodies, ID tokens, JWK sets.

Parsers disagree on what a repeated member means (the first wins, the last wins, an error), so a
document with one is refused rather than read one way here and another way by whoever checked it.
`NaN`, `Infinity` and numbers too large for a float (`1e999`) are not JSON either: Python reads
them, but writes them back as text no other parser accepts. Nor is a lone UTF-16 surrogate
(`"\\ud800"`) text: no client sends one on purpose, and nothing after this reader (UTF-8, SQLite,
digests) can encode it, so a document holding one is refused, naming where.
Plain Python: no Flask here.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .errors import echo


class StrictJSONError(ValueError):
    """The text is not strict JSON; the message says why, quoting at most a short excerpt."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, value in pairs:
        if name in result:
            raise StrictJSONError(f"member {echo(name)} appears more than once")
        result[name] = value
    return result


def _no_constant(name: str) -> Any:
    # Called for NaN, Infinity and -Infinity only.
    raise StrictJSONError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise StrictJSONError(f"number {echo(text)} is too large")
    return number


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        # Longer than Python converts (sys.get_int_max_str_digits()); nobody sends such numbers.
        raise StrictJSONError(f"an integer of {len(text)} digits is too long") from None


# Deeper nesting than this is refused before parsing: the parser recurses once per level, and a
# document nested to near the interpreter's recursion limit leaves no stack for whatever else
# runs at that moment (a finalizer, a warning). Real documents nest a few levels.
MAX_DEPTH = 512
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def _too_deep(data: bytes | str) -> bool:
    """Whether `data` opens more than MAX_DEPTH arrays or objects inside one another (brackets
    inside strings not counted). Counting brackets first keeps the common case one C pass."""
    if isinstance(data, bytes):
        if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
            return False
        try:
            data = data.decode(json.detect_encoding(data))
        except (UnicodeDecodeError, LookupError):
            return False  # the parser says what is wrong with it
    elif data.count("[") + data.count("{") <= MAX_DEPTH:
        return False
    depth = 0
    for token in _STRING_OR_BRACKET.finditer(data):
        bracket = token[0]
        if bracket in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif bracket in "]}":
            depth -= 1
    return False


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,63}")


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # only a lone surrogate cannot be encoded
        return False
    return True


def _step(path: str, name: str) -> str:
    shown = name if _PLAIN_NAME.fullmatch(name) else echo(name)
    return f"{path}.{shown}" if path else shown


def _short(path: str) -> str:
    # A path of deep nesting is cut at its start: its end says where.
    return path if len(path) <= 128 else "\u2026" + path[-128:]


def _all_text(document: Any) -> bool:
    """Whether no string of `document` holds a lone surrogate: one pass of the C encoder."""
    try:
        json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    except RecursionError:
        return False  # the walk, which does not recurse, decides
    return True


def _no_lone_surrogates(document: Any) -> None:
    """Raises StrictJSONError naming the first string (or member name) holding a lone surrogate."""
    if _all_text(document):
        return
    pending: list[tuple[Any, str]] = [(document, "")]
    while pending:
        value, path = pending.pop()
        if isinstance(value, str):
            if not _is_text(value):
                where = _short(path) or "the document"
                raise StrictJSONError(f"{where}: a lone UTF-16 surrogate is not text")
        elif isinstance(value, dict):
            for name, member in reversed(value.items()):
                if not _is_text(name):
                    where = f" in {_short(path)}" if path else ""
                    raise StrictJSONError(
                        f"a member name{where} holds a lone UTF-16 surrogate, which is not text"
                    )
                pending.append((member, _step(path, name)))
        elif isinstance(value, list):
            pending.extend((item, f"{path}[{i}]") for i, item in reversed(list(enumerate(value))))


def loads(data: bytes | str) -> Any:
    """The JSON value of `data` (UTF-8, -16 or -32 when bytes), strictly read.

    Raises StrictJSONError for text that is not JSON, a member repeated within one object, `NaN`,
    `Infinity`, `-Infinity`, a number that overflows a float, a lone UTF-16 surrogate, or nesting
    too deep to read.
    """
    if _too_deep(data):
        raise StrictJSONError(f"it is nested too deeply (more than {MAX_DEPTH} levels)")
    try:
        document = json.loads(
            data,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_float=_finite_float,
            parse_int=_integer,
        )
    except StrictJSONError:
        raise
    except json.JSONDecodeError as error:
        raise StrictJSONError(str(error)) from None
    except UnicodeDecodeError:
        raise StrictJSONError("it is not UTF-8, UTF-16 or UTF-32 text") from None
    except RecursionError:
        raise StrictJSONError("it is nested too deeply") from None
    if not _cannot_hold_surrogates(data):
        _no_lone_surrogates(document)
    return document


def _cannot_hold_surrogates(data: bytes | str) -> bool:
    """True when `data` is ASCII without a `\\u` escape: a lone surrogate can come only from an
    escape or from non-ASCII bytes (UTF-8, -16 or -32 code units of D800-DFFF), so the document
    need not be walked. Almost every request body is such text."""
    if isinstance(data, bytes):
        return data.isascii() and b"\\u" not in data
    return data.isascii() and "\\u" not in data


def loads_object(data: bytes | str) -> dict[str, Any]:
    """Like `loads`, for a document that must be a JSON object; raises StrictJSONError."""
    document = loads(data)
    if not isinstance(document, dict):
        raise StrictJSONError("it is not a JSON object")
    return document
