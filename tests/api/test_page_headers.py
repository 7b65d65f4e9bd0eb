"""The browser pages refuse framing and load only their own files (docs/security.md)."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from starlette.testclient import TestClient

pytestmark = pytest.mark.lake


def test_the_inspector_page_and_assets_carry_the_policy(client: TestClient) -> None:
    for path in ("/inspector/", "/inspector/app.js", "/inspector/inspector.css"):
        response = client.get(path)
        assert response.status_code == 200, path
        policy = response.headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in policy and "script-src 'self';" in policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_graphiql_allows_its_own_inline_script_by_hash_only(client: TestClient) -> None:
    response = client.get("/graphql", headers={"Accept": "text/html"})
    assert response.status_code == 200
    policy = response.headers["Content-Security-Policy"]
    assert response.headers["X-Frame-Options"] == "DENY"
    inline = re.findall(r"<script>(.*?)</script>", response.text, re.DOTALL)
    assert inline, "the page has its start-up script"
    for body in inline:
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy
    script_src = policy.split("script-src", 1)[1].split(";", 1)[0]
    assert "unsafe-inline" not in script_src
    asset = client.get("/graphiql/static/graphiql@3.8.3/graphiql.min.js")
    assert asset.headers["X-Frame-Options"] == "DENY"
