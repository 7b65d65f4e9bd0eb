"""``python -m kinflow.schema [path]``: write the SDL (default ``schema.graphql``)."""

from __future__ import annotations

import sys
from pathlib import Path

from kinflow.schema import sdl


def main() -> None:
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "schema.graphql")
    target.write_text(sdl())
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
