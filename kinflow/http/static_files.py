"""Static files with the headers kinflow's browser pages need.

GraphiQL's pinned, versioned assets may be cached for a day; the inspector's
unhashed page must be revalidated. Every file gets ``nosniff`` and the page
headers below: no framing by another site (clickjacking an operator's
session into a Cancel or Abort), no referrer, and a content security policy
that lets the pages load only their own files and talk only to their own
origin. One class with the ``Cache-Control`` value as a parameter, so the
two packages differ only there.
"""

from __future__ import annotations

import os
from typing import Any

from starlette.responses import Response
from starlette.staticfiles import PathLike, StaticFiles
from starlette.types import Scope

#: the inspector: its own modules and stylesheet, GraphQL over HTTP and websocket to itself
INSPECTOR_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; "
                    "img-src 'self' data:; connect-src 'self'; object-src 'none'; "
                    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def graphiql_policy(inline_script_hashes: list[str]) -> str:
    """GraphiQL's page: its shipped assets, its one inline start-up script by hash.

    GraphiQL's React components set inline styles, so styles may be inline;
    scripts may not, except the page's own start-up script named by hash.
    """
    scripts = " ".join(f"'sha256-{digest}'" for digest in inline_script_hashes)
    return ("default-src 'self'; "
            f"script-src 'self' {scripts}; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
            "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def page_headers(policy: str) -> dict[str, str]:
    """The headers every kinflow browser page and asset carries."""
    return {
        "Content-Security-Policy": policy,
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }


class HeaderedStaticFiles(StaticFiles):
    """``StaticFiles`` whose file responses carry ``cache_control`` and the page headers."""

    def __init__(self, *, cache_control: str, policy: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cache_control = cache_control
        self.headers = page_headers(policy)

    def file_response(
        self, full_path: PathLike, stat_result: os.stat_result, scope: Scope,
        status_code: int = 200,
    ) -> Response:  # fmt: skip
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = self.cache_control
        response.headers.update(self.headers)
        return response
