"""Moved to ``kinflow.gdr`` (pure, shared by core and shell); kept for old imports."""

from kinflow.gdr import (  # noqa: F401
    SCHEME,
    Gdr,
    check_dataset,
    check_document_id,
    document_id,
    format_gdr,
    is_gdr,
    parse_gdr,
    to_gdr,
    to_ref,
)
