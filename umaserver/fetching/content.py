"""What a fetched answer must be, for each kind of URI this server checks.

- `scope`: a scope description (the spec: a JSON document whose `name` is shown to the owner, with
  an optional `icon_uri`): an object, `name` a non-empty string of at most `MAX_NAME_LENGTH`
  characters without control characters, `icon_uri` (optional) an http(s) URI.
- `image`: an icon or logo: PNG, JPEG, GIF or WebP, told by its first bytes, labelled as that type
  (a file labelled otherwise is refused: whoever serves it mislabelled may mean it). Never SVG:
  an SVG is a document that can hold script.
- `page`: a web page (`client_uri`): a 200 answer labelled HTML.
Plain Python: no Flask here.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

from .. import strict_json
from .fetcher import Fetched, FetchError, target

Kind = Literal["scope", "image", "page"]
KINDS: tuple[Kind, ...] = ("scope", "image", "page")

MAX_NAME_LENGTH = 200

ACCEPT: dict[Kind, str] = {
    "scope": "application/json",
    "image": "image/png, image/jpeg, image/gif, image/webp",
    "page": "text/html, application/xhtml+xml",
}
PAGE_TYPES = ("text/html", "application/xhtml+xml")


@dataclass(frozen=True)
class ScopeDescription:
    name: str
    icon_uri: str | None


def scope_description(fetched: Fetched) -> ScopeDescription:
    """The scope description in the answer; FetchError when it is not one."""
    try:
        document = strict_json.loads(fetched.body)
    except strict_json.StrictJSONError as error:
        raise FetchError(f"the scope description is not JSON ({error})") from None
    if not isinstance(document, dict):
        raise FetchError("the scope description is not a JSON object")
    name = document.get("name")
    if not isinstance(name, str) or not name.strip():
        raise FetchError("the scope description has no name (a non-empty string)")
    name = name.strip()
    if len(name) > MAX_NAME_LENGTH:
        raise FetchError(f"the scope description's name is longer than {MAX_NAME_LENGTH}")
    if any(unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") for char in name):
        raise FetchError("the scope description's name has control or format characters")
    icon_uri = document.get("icon_uri")
    if icon_uri is not None and not (isinstance(icon_uri, str) and is_fetchable(icon_uri)):
        raise FetchError("the scope description's icon_uri is not an http(s) URI")
    return ScopeDescription(name, icon_uri)


def image_type(fetched: Fetched) -> str:
    """The image's content type, when its bytes and its label agree on one of the four kinds."""
    sniffed = sniff_image(fetched.body)
    if sniffed is None:
        raise FetchError("the answer is not a PNG, JPEG, GIF or WebP image")
    labelled = "image/jpeg" if fetched.content_type == "image/jpg" else fetched.content_type
    if labelled != sniffed:
        raise FetchError(f"the image is a {sniffed} labelled {fetched.content_type or 'nothing'}")
    return sniffed


def sniff_image(data: bytes) -> str | None:
    """PNG, JPEG, GIF or WebP by their signatures, else None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def page_type(fetched: Fetched) -> str:
    if fetched.content_type not in PAGE_TYPES:
        raise FetchError(f"the answer is not a web page ({fetched.content_type or 'no type'})")
    return fetched.content_type


def is_fetchable(uri: str) -> bool:
    """Whether `uri` is one this server would try to fetch (an http(s) URI it can read)."""
    try:
        target(uri)
    except FetchError:
        return False
    return True
