"""strict_json: the one reader for untrusted JSON."""

from __future__ import annotations

from typing import Any

import pytest

from umaserver.strict_json import StrictJSONError, loads, loads_object


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (
            '{"a": 1, "b": [1.5, -2, 1e308, 1e-999], "c": null}',
            {"a": 1, "b": [1.5, -2, 1e308, 0.0], "c": None},
        ),
        (
            '{"a": {"x": 1}, "b": {"x": 2}}',
            {"a": {"x": 1}, "b": {"x": 2}},
        ),  # same name, two objects
        ("[]", []),
        ('"NaN"', "NaN"),
        (b'{"caf\\u00e9": "\xc3\xa9"}', {"café": "é"}),
        ('{"a": 1}'.encode("utf-16"), {"a": 1}),
        ('["\\ud83d\\ude00", "\U0001f600"]', ["\U0001f600", "\U0001f600"]),  # a pair is text
        ("[" * 512 + "]" * 512, _nested(512)),  # as deep as is read
        ('["' + "[{" * 600 + '", "\\"[["]', ["[{" * 600, '"[[']),  # brackets in strings
        (("[" * 300 + "]" * 300).encode("utf-16"), _nested(300)),
    ],
)
def test_strict_json_is_read(text: str | bytes, value: Any) -> None:
    assert loads(text) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1, "a": 1}', "member 'a' appears more than once"),
        ('[{"x": {"a": 1, "a": 2}}]', "member 'a' appears more than once"),
        (
            '{"' + "n" * 100 + '": 1, "' + "n" * 100 + '": 2}',
            "member '" + "n" * 64 + "\u2026' appears",
        ),
        ('{"a\\n\\u001b": 1, "a\\n\\u001b": 2}', "member 'a\\n\\x1b' appears"),
        ('{"it\'s": 1, "it\'s": 2}', 'member "it\'s" appears'),
        ("NaN", "NaN is not a JSON number"),
        ('{"a": Infinity}', "Infinity is not a JSON number"),
        ("[-Infinity]", "-Infinity is not a JSON number"),
        ("1e999", "number '1e999' is too large"),
        ("[-1e999]", "number '-1e999' is too large"),
        ("1" * 5000, "an integer of 5000 digits is too long"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("[" * 513 + "]" * 513, "nested too deeply (more than 512 levels)"),
        ('{"a":' * 513 + "1" + "}" * 513, "nested too deeply"),
        (("[" * 513 + "]" * 513).encode("utf-32"), "nested too deeply"),
        ("{not json", "Expecting property name"),
        ("", "Expecting value"),
        ("[1] [2]", "Extra data"),
        (b"\xff\xfe\xfd", "not UTF-8, UTF-16 or UTF-32"),
        ('"\\ud800"', "the document: a lone UTF-16 surrogate is not text"),
        ('{"name": "a\\udfff"}', "name: a lone UTF-16 surrogate is not text"),
        ('{"claims": [{"value": {"x": ["\\ud800"]}}]}', "claims[0].value.x[0]: a lone"),
        ('{"a b": "\\ud800"}', "'a b': a lone"),
        ('{"\\ud800": 1}', "a member name holds a lone UTF-16 surrogate"),
        ('{"v": {"\\udc00": 1}}', "a member name in v holds a lone"),
        ('["\\udc00\\ud800"]', "[0]: a lone"),  # a pair in the wrong order is two lone ones
        (b'["\xed\xa0\x80"]', "[0]: a lone"),  # encoded in the bytes themselves
        ("[" * 500 + '"\\ud800"' + "]" * 500, "\u20260][0][0]"),  # a deep path cut short
    ],
)
def test_not_strict_json_is_refused(text: str | bytes, message: str) -> None:
    with pytest.raises(StrictJSONError) as refused:
        loads(text)
    assert message in str(refused.value)
    assert isinstance(refused.value, ValueError)


def test_a_long_member_name_is_cut_short_in_the_message() -> None:
    name = "n" * 1000
    with pytest.raises(StrictJSONError) as refused:
        loads(f'{{"{name}": 1, "{name}": 2}}')
    assert len(str(refused.value)) < 100


@pytest.mark.parametrize(
    ("text", "refused"), [("{}", False), ("[]", True), ("null", True), ('"{}"', True)]
)
def test_loads_object_wants_an_object(text: str, refused: bool) -> None:
    if refused:
        with pytest.raises(StrictJSONError, match="not a JSON object"):
            loads_object(text)
    else:
        assert loads_object(text) == {}
