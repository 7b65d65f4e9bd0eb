"""The inspector's routes without a browser: the page, its assets, their imports."""

from __future__ import annotations

import re

from starlette.applications import Starlette
from starlette.testclient import TestClient

from kinflow.inspector import STATIC_DIR, inspector_routes


def client() -> TestClient:
    return TestClient(Starlette(routes=inspector_routes()))


def test_the_page_is_served_at_inspector() -> None:
    with client() as http:
        bare = http.get("/inspector", follow_redirects=False)
        assert bare.status_code == 307 and bare.headers["location"] == "/inspector/"
        page = http.get("/inspector/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert '<script type="module" src="./app.js">' in page.text
        assert page.headers["cache-control"] == "no-cache"


def test_every_asset_and_every_module_import_resolves() -> None:
    with client() as http:
        for name in ("app.js", "gql.js", "dom.js", "vlist.js", "inspector.css"):
            response = http.get(f"/inspector/{name}")
            assert response.status_code == 200, name
            kind = "text/css" if name.endswith(".css") else "javascript"
            assert kind in response.headers["content-type"], name
        assert http.get("/inspector/missing.js").status_code == 404
    for module in STATIC_DIR.glob("*.js"):
        for target in re.findall(r'^import .* from "(\./[^"]+)";$', module.read_text(), re.M):
            assert (STATIC_DIR / target).is_file(), f"{module.name} imports {target}"
