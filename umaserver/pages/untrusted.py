"""Showing untrusted content from registration on pages (issue 12): scope descriptions, icons,
logos and links to third-party pages.

INTERFACE SKELETON: the fetching work fills this in (background checks, cached results, images
served by this server, the interstitial); until then it shows raw text and no images or links.
Templates reach these as globals (`scope_view`, `link_view`, `image_src`): see `init_app`.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Flask


@dataclass(frozen=True)
class ScopeView:
    scope: str  # the raw scope string, always shown somewhere
    name: str | None  # the fetched description's name, once the fetch worked
    icon_src: str | None  # a path of this server serving the checked icon, or None


@dataclass(frozen=True)
class LinkView:
    uri: str  # the full URL, shown as text
    href: str | None  # the interstitial's path on this server, or None: not a link
    status: str  # "checked", "not checked", "failed" or "pending", shown next to it


def scope_view(scope: str) -> ScopeView:
    return ScopeView(scope, None, None)


def link_view(uri: str) -> LinkView:
    return LinkView(uri, None, "not checked")


def image_src(uri: str | None) -> str | None:
    return None


def init_app(app: Flask) -> None:
    app.jinja_env.globals.update(scope_view=scope_view, link_view=link_view, image_src=image_src)
