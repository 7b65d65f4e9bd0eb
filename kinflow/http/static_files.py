"""Static files with the headers kinflow's browser pages need.

GraphiQL's pinned, versioned assets may be cached for a day; the inspector's
unhashed page must be revalidated. Both get ``nosniff``. One class with the
``Cache-Control`` value as a parameter, so the two packages differ only there.
"""

from __future__ import annotations

import os
from typing import Any

from starlette.responses import Response
from starlette.staticfiles import PathLike, StaticFiles
from starlette.types import Scope


class HeaderedStaticFiles(StaticFiles):
    """``StaticFiles`` whose file responses carry ``cache_control`` and ``nosniff``."""

    def __init__(self, *, cache_control: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cache_control = cache_control

    def file_response(
        self, full_path: PathLike, stat_result: os.stat_result, scope: Scope,
        status_code: int = 200,
    ) -> Response:  # fmt: skip
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = self.cache_control
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response
