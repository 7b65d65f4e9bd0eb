"""GraphiQL served from the package, so the IDE works with no internet.

Strawberry's GraphiQL page loads React, GraphiQL and the explorer plugin from
``https://unpkg.com``; offline that page stays on "Loading...". The same
files (byte-identical, with their licences, see ``static/NOTICE.md``) ship
under ``static/`` in unpkg's ``<package>@<version>/<path>`` layout, so
``local_page`` only swaps the CDN prefix for ``ASSETS_PREFIX`` and the
template's ``integrity`` attributes keep holding.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from starlette.routing import BaseRoute, Mount

from kinflow.http.static_files import HeaderedStaticFiles, graphiql_policy, page_headers

STATIC_DIR = Path(__file__).parent / "static"
ASSETS_PREFIX = "/graphiql/static"
CDN = "https://unpkg.com"
_CDN_URL = re.compile(r"""(?P<attr>(?:src|href)=")https://unpkg\.com/(?P<path>[^"]+)(?=")""")
_INLINE_SCRIPT = re.compile(r"<script>(?P<body>.*?)</script>", re.DOTALL)


class MissingAsset(RuntimeError):
    """The template names a CDN file kinflow does not ship (strawberry was upgraded)."""


def cdn_paths(html: str) -> list[str]:
    """The ``<package>@<version>/<path>`` of every unpkg URL the page loads."""
    return [m.group("path") for m in _CDN_URL.finditer(html)]


def local_page(html: str, prefix: str = ASSETS_PREFIX) -> str:
    """``html`` with every unpkg asset URL pointing at the shipped copy under ``prefix``."""
    missing = [p for p in cdn_paths(html) if not (STATIC_DIR / p).is_file()]
    if missing:
        raise MissingAsset(f"GraphiQL assets not shipped with kinflow: {', '.join(missing)}")
    page = _CDN_URL.sub(lambda m: f"{m.group('attr')}{prefix}/{m.group('path')}", html)
    if CDN in page:
        raise MissingAsset("the GraphiQL page still names the CDN after rewriting")
    return page


def inline_script_hashes(html: str) -> list[str]:
    """The base64 SHA-256 of each inline ``<script>`` body, as a CSP source names it."""
    return [base64.b64encode(hashlib.sha256(m.group("body").encode()).digest()).decode()
            for m in _INLINE_SCRIPT.finditer(html)]  # fmt: skip


def page_response_headers(page: str) -> dict[str, str]:
    """The GraphiQL page's headers: its inline start-up script allowed by hash, nothing else."""
    return page_headers(graphiql_policy(inline_script_hashes(page)))


def graphiql_routes(prefix: str = ASSETS_PREFIX) -> list[BaseRoute]:
    """The shipped assets below ``prefix`` (no token: they are public library files)."""
    # pinned, versioned files: a browser may keep them for a day
    files = HeaderedStaticFiles(directory=STATIC_DIR, cache_control="public, max-age=86400",
                                policy=graphiql_policy([]))
    return [Mount(prefix, app=files, name="graphiql-assets")]


__all__ = ["ASSETS_PREFIX", "STATIC_DIR", "MissingAsset", "graphiql_routes", "local_page",
           "page_response_headers"]
