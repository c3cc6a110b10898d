"""Fetching what registrations point at (issue 12): scope descriptions, icons, logos and client
pages, checked in the background and never inside a request.

- `fetcher`: the safe fetcher (addresses checked after resolution, connection to the checked
  address itself, no redirects, one deadline, a size cap); `addresses`: which addresses it refuses.
- `content`: what a fetched answer must be (a scope description, an image, a web page).
- `job`: the background job that takes queued URIs from the database and checks them; `queue`:
  how requests and pages add URIs to that queue.
"""
