"""The README stays true: every setting and every error code is documented."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import kinflow
from kinflow.errors import KinflowError
from kinflow.settings import Settings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_every_setting_is_documented() -> None:
    missing = [f"KINFLOW_{name.upper()}" for name in Settings.model_fields
               if f"`KINFLOW_{name.upper()}`" not in README]  # fmt: skip
    assert missing == []


def _all_error_classes() -> set[type[KinflowError]]:
    for module in pkgutil.walk_packages(kinflow.__path__, "kinflow."):
        if module.name.endswith("__main__"):
            continue
        importlib.import_module(module.name)
    found: set[type[KinflowError]] = set()
    todo: list[type[KinflowError]] = [KinflowError]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            found.add(sub)
            todo.append(sub)
    return found


def test_every_error_code_is_documented() -> None:
    codes = {cls.code for cls in _all_error_classes()}
    codes -= {"remote-error", "spawn-not-supported"}  # CLI passthrough; gone with subworkflows
    missing = sorted(code for code in codes if f"`{code}`" not in README)
    assert missing == []
