"""The app's request class: Flask's, with url-encoded forms (the token, introspection and
revocation endpoints) read in one step.

Werkzeug reads such a form as this does (the body, limited by `MAX_CONTENT_LENGTH`, split with
`parse_qsl` keeping blank values, undecodable bytes kept percent-encoded), but through a general
form parser built for each request, which cost a token request more than its own parsing.
Multipart forms and everything else keep Werkzeug's parser.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

import flask
import werkzeug.urls  # noqa: F401 - registers the "werkzeug.url_quote" codec error handler

URLENCODED = "application/x-www-form-urlencoded"


class Request(flask.Request):
    def _load_form_data(self) -> None:
        if "form" in self.__dict__:
            return
        if self.mimetype != URLENCODED:
            super()._load_form_data()
            return
        body = self.get_data(cache=True)  # 413 beyond MAX_CONTENT_LENGTH, as Werkzeug's parser
        try:
            items = parse_qsl(body.decode(), keep_blank_values=True, errors="werkzeug.url_quote")
        except ValueError:  # not UTF-8: Werkzeug's parser reads such a body as an empty form
            items = []
        self.__dict__["form"] = self.parameter_storage_class(items)
        self.__dict__["files"] = self.parameter_storage_class()
