"""GraphiQL's assets ship with kinflow: the page names no CDN, every file is served.

Strawberry's template loads seven files from unpkg; the page kinflow serves
must load the same bytes from ``/graphiql/static`` (checked against the
template's own SRI hashes), so GraphiQL works on a machine with no internet.
"""

from __future__ import annotations

import base64
import hashlib
import re

from starlette.applications import Starlette
from starlette.testclient import TestClient
from strawberry.http.ides import get_graphql_ide_html

from kinflow.graphiql import ASSETS_PREFIX, STATIC_DIR, cdn_paths, graphiql_routes, local_page

TAG = re.compile(r'<(?:script|link)\b[^>]*?(?:src|href)="([^"]+)"[^>]*?integrity="([^"]+)"', re.S)


def _template() -> str:
    return get_graphql_ide_html(graphql_ide="graphiql")


def test_every_asset_the_template_loads_is_shipped_byte_for_byte() -> None:
    html = _template()
    tags = TAG.findall(html)
    assert len(tags) == len(cdn_paths(html)) == 7
    for url, integrity in tags:
        path = url.removeprefix("https://unpkg.com/")
        body = (STATIC_DIR / path).read_bytes()
        digest = base64.b64encode(hashlib.sha384(body).digest()).decode()
        assert integrity == f"sha384-{digest}", path
        package = path.split("/")[0] if not path.startswith("@") else "/".join(path.split("/")[:2])
        licensed = (STATIC_DIR / package / "LICENSE").is_file() or package.startswith("@graphiql/")
        assert licensed, f"{package} ships without its licence"
    assert "@graphiql/plugin-explorer" in (STATIC_DIR / "NOTICE.md").read_text()


def test_the_page_names_only_local_urls() -> None:
    page = local_page(_template())
    assert "unpkg.com" not in page
    urls = re.findall(r'(?:src|href)="(/[^"]+)"', page)
    assert len(urls) == 7 and all(u.startswith(ASSETS_PREFIX + "/") for u in urls)
    with TestClient(Starlette(routes=graphiql_routes())) as http:
        for url in urls:
            response = http.get(url)
            assert response.status_code == 200, url
            assert response.headers["x-content-type-options"] == "nosniff"
        assert http.get(f"{ASSETS_PREFIX}/nothing.js").status_code == 404
        assert http.get(f"{ASSETS_PREFIX}/../__init__.py").status_code == 404
