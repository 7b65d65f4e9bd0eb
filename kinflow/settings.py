"""Runtime settings, read from ``KINFLOW_*`` environment variables (and ``.env``).

One object, built once per process (or per test), passed down explicitly:
nothing below the CLI and the app factory reads the environment itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KINFLOW_", env_file=".env", extra="ignore")

    mongodb_uri: str | None = Field(
        default=None, description="MongoDB replica-set URI; unset starts the embedded lake."
    )
    database: str = Field(default="kinflow", description="The MongoDB database holding the lake.")
    dataset: str = Field(default="production", description="The default dataset (collection).")
    extra_datasets: str = Field(
        default="",
        description=(
            "More datasets requests may name besides the default (comma separated; created at "
            "start-up). Datasets already in the lake may be named too; others are refused."
        ),
    )
    data_dir: Path = Field(
        default=Path(".kinflow"), description="Where the embedded lake keeps its data."
    )
    host: str = Field(default="127.0.0.1", description="Address the API binds to.")
    port: int = Field(default=8080, description="Port the API listens on.")
    metrics: bool = Field(default=True, description="Count and time the work for /metrics.")
    metrics_port: int | None = Field(
        default=None, description="Serve /metrics on this port (no token) instead of the API's."
    )
    log_format: Literal["text", "json"] = Field(
        default="text", description="text (readable) or json (one JSON object per line)."
    )

    content_indexes: str = Field(
        default="",
        description="Indexes for content queries: ';'-separated lists of ','-separated paths.",
    )
    embedded_sync_on_commit: bool = Field(
        default=True, description="fsync every commit of the embedded lake (survives kill -9)."
    )
    embedded_test_commands: bool = Field(
        default=False, description="Enable failpoints on the embedded lake (tests only)."
    )
    embedded_start_timeout: float = Field(
        default=60.0, description="Seconds to wait for the embedded lake to answer ping."
    )
    embedded_memory_mb: int = Field(
        default=1024, ge=0,
        description=(
            "Memory budget (MiB of RSS) of the embedded lake daemon: past it the daemon is "
            "restarted (it leaks per transaction). Its cache is a quarter, at least 256 MiB. "
            "0 turns the restarts off; otherwise at least 512."
        ),
    )

    @field_validator("embedded_memory_mb")
    @classmethod
    def _memory_budget(cls, value: int) -> int:
        if 0 < value < 512:
            raise ValueError("KINFLOW_EMBEDDED_MEMORY_MB is 0 (no restarts) or at least 512")
        return value

    operation_timeout: float = Field(
        default=30.0, description="Client-side deadline (seconds) on each lake operation."
    )
    transaction_attempts: int = Field(
        default=12, description="Attempts of a transaction before it fails as a conflict."
    )
    lake_transactions: int = Field(
        default=0, ge=0,
        description=("Transactions one process keeps open on the lake at once; 0 picks 4 on "
                     "the embedded lake (more stall it, docs/performance.md) and no cap on "
                     "MongoDB."),
    )
    hub_queue_size: int = Field(
        default=1000, description="Events a subscriber may lag behind before it must resync."
    )
    max_hub_streams: int = Field(
        default=16, ge=1,
        description=(
            "Change streams one API process may hold open at once (one per dataset watched, "
            "the default's included); past it a subscription gets too-many-streams."
        ),
    )

    worker: bool = Field(
        default=True, description="Run the heartbeat worker inside the API process."
    )
    effect_handlers: str = Field(
        default="",
        description="Effect handler modules (dotted names or .py paths, comma separated).",
    )
    propagation: Literal["auto", "inline", "background"] = Field(
        default="auto",
        description=(
            "For tests and comparisons only; leave it at auto. auto: in a cohort of up to "
            "32 live rows a child's verb returns after its parent reacted, larger cohorts' "
            "parents react in paced background rounds; inline/background force one."
        ),
    )
    worker_interval: float = Field(default=1.0, description="Seconds between heartbeat passes.")
    worker_concurrency: int = Field(
        default=8, ge=1,
        description="Owed items (effects, ticks, repairs) one worker handles at once.")
    retention_days: int | None = Field(
        default=None, ge=1,
        description=(
            "Days a finished family (a root and every descendant, all finished) is kept after "
            "its last member finished; the worker then purges it (never one on hold). A "
            "definition's retention.days overrides it; unset keeps everything."
        ),
    )

    spawn_txn_limit: int = Field(
        default=256, description="Children created inside the spawning transaction."
    )
    max_spawn_depth: int = Field(default=6, description="Deepest allowed chain of spawns.")
    max_cascade_moves: int = Field(
        default=100, ge=1,
        description="Stage moves one call may make before it is refused (cascade-limit).")
    max_fan_out: int = Field(
        default=1_000_000, ge=1,
        description="Rows one lake forEach with maxActive may register (fan-out-limit).")
    max_active_children: int = Field(
        default=10_000, ge=1,
        description="Rows a cohort without maxActive may have: it starts them all at once.")
    sparse_registry_rows: int = Field(
        default=10_000, ge=1,
        description=("Registry rows from which a parent loads without its rows: a commit "
                     "reads only the chunks it needs (docs/subworkflows.md)."))
    sparse_commit_chunks: int = Field(
        default=320, ge=1,
        description=("Registry chunks (32 rows each) one commit of a sparse parent may read; "
                     "a commit needing more is refused with registry-too-large."))
    max_idempotency_key_bytes: int = Field(
        default=256, ge=1, description="Longest idempotency key, in UTF-8 bytes (input-too-large)."
    )
    max_reason_bytes: int = Field(
        default=4096, ge=1,
        description="Longest reason, error or detail text a verb stores, in UTF-8 bytes.",
    )
    max_value_bytes: int = Field(
        default=256 * 1024, ge=1,
        description="Largest params, field value or effect outputs of one verb, as JSON bytes.",
    )
    max_instance_bytes: int = Field(
        default=12 * 1024 * 1024, ge=1024,
        description=(
            "Largest instance document a verb may leave behind (instance-too-large); well "
            "under MongoDB's 16 MB so aborts and engine bookkeeping always fit."
        ),
    )
    groq_timeout: float = Field(
        default=10.0, ge=0,
        description=(
            "Seconds one GROQ query over the lake may evaluate (the groq field and the engine's "
            "forEach/initialValue queries) before groq-limit-exceeded; 0 turns this off."
        ),
    )
    groq_max_scanned: int = Field(
        default=5_000_000, ge=0,
        description=(
            "Documents and array elements one GROQ query may visit, nested loops counted "
            "(groq-limit-exceeded); 0 turns this off."
        ),
    )
    groq_max_fetched: int = Field(
        default=100_000, ge=0,
        description=(
            "Documents one GROQ query may read from the lake and hold in memory "
            "(groq-limit-exceeded); 0 turns this off."
        ),
    )
    groq_max_value_bytes: int = Field(
        default=64 * 1024 * 1024, ge=0,
        description=(
            "Estimated bytes of the values one GROQ query may build (strings, arrays and "
            "objects it assembles, and its answer) before groq-limit-exceeded; 0 turns this off."
        ),
    )
    groq_max_params_bytes: int = Field(
        default=256 * 1024, ge=0,
        description="Largest parameters an API caller may pass to one GROQ query, as JSON "
        "bytes (groq-limit-exceeded); 0 turns this off.",
    )
    groq_threads: int = Field(
        default=2, ge=1, le=64,
        description="Worker threads that evaluate API callers' GROQ (the groq field, cohort "
        "where filters); the engine's own queries have their own threads.",
    )
    groq_engine_threads: int = Field(
        default=2, ge=1, le=64,
        description="Worker threads that evaluate the engine's own GROQ over the lake "
        "(spawn forEach, initialValue queries); never used by API callers.",
    )
    groq_caller_concurrency: int = Field(
        default=1, ge=1, le=64,
        description="GROQ evaluations one API caller (one token's actor) may run at once; "
        "its further ones wait for its earlier ones.",
    )
    groq_max_query_length: int = Field(
        default=100_000, ge=0,
        description="Longest GROQ query text, in characters (groq-limit-exceeded); 0: no limit.",
    )
    max_definition_bytes: int = Field(
        default=1024 * 1024, ge=1024,
        description="Largest workflow definition deploy accepts, as JSON bytes "
        "(definition-too-large).",
    )
    max_row_output_bytes: int = Field(
        default=16 * 1024, ge=2,
        description="Largest outputs a finished child copies onto its parent's registry row, "
        "as JSON bytes; larger ones leave outputs null and outputsError output-too-large.",
    )
    cancel_timeout: int = Field(
        default=3600, ge=1,
        description="Seconds a graceful cancellation (cancelInstance) may take before the "
        "instance is aborted instead, unless its definition sets cancelTimeoutSeconds.",
    )
    bulk_batch_rows: int = Field(
        default=64, ge=1, le=256,
        description="Rows one commit of a bulk cohort verb (redriveCohort) applies; a call "
        "on more rows commits in batches of this many.",
    )

    # -- the GraphQL API ---------------------------------------------------
    api_tokens: str | None = Field(
        default=None,
        description=(
            "API tokens: 'token=actor-id:role[|role],...' or a JSON object "
            '{"token": {"id": ..., "roles": [...]}}. Unset with no tokens file: open, '
            "loopback only."
        ),
    )
    api_tokens_file: Path | None = Field(
        default=None, description="A JSON file of token -> {id, roles} (added to api_tokens)."
    )
    auth_max_failures: int = Field(
        default=10, ge=0,
        description=(
            "Wrong tokens one client address may send per window before every request from "
            "it gets too-many-attempts (HTTP 429) until the window ends; 0 turns this off."
        ),
    )
    auth_failure_window: float = Field(
        default=60.0, gt=0, description="Seconds of the window failed token attempts count in."
    )
    auth_throttle_clients: int = Field(
        default=10_000, ge=1,
        description="Client addresses the failed-attempt table remembers (oldest dropped first).",
    )
    graphiql: bool = Field(default=True, description="Serve GraphiQL at /graphql in a browser.")
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description=(
            "Browser origins (scheme://host[:port]) allowed to call the API from another "
            "origin: CORS over HTTP and websocket handshakes. Comma separated or a JSON list."
        ),
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description=(
            "Host names requests may address besides 127.0.0.1, localhost and [::1] (DNS "
            "rebinding guard; always on without tokens, with tokens only when set)."
        ),
    )

    forwarded_allow_ips: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description=(
            "Proxy addresses whose X-Forwarded-For/-Proto `kinflow serve` trusts; empty: "
            "none, the TCP peer is the client."
        ),
    )

    @field_validator("allowed_origins", "allowed_hosts", "forwarded_allow_ips", mode="before")
    @classmethod
    def _name_list(cls, value: Any) -> Any:
        """A list from the environment: JSON (``["a", "b"]``) or comma separated (``a,b``)."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]

    max_query_depth: int = Field(default=12, description="Deepest selection an operation may nest.")
    max_query_tokens: int = Field(default=4000, description="Most tokens one document may have.")
    max_query_aliases: int = Field(default=30, description="Most aliases one document may use.")
    max_page_size: int = Field(default=1000, description="Largest `first` a connection accepts.")
    max_request_bytes: int = Field(
        default=8 * 1024 * 1024, description="Largest HTTP request body (request-too-large)."
    )
    max_subscriptions_per_connection: int = Field(
        default=100, description="Operations one websocket may run at once."
    )
    subscription_queue_size: int = Field(
        default=1000, description="Events a GraphQL subscriber may lag before it must resubscribe."
    )
    subscription_snapshot_limit: int = Field(
        default=1000, description="Most instances the first event of instancesChanged lists."
    )
    snapshot_max_documents: int = Field(
        default=5000, ge=1,
        description=("Documents the subscription snapshots of one API process hold in flight; "
                     "later snapshots wait (too-many-streams after the operation timeout)."),
    )
    max_sockets_per_client: int = Field(
        default=256, ge=1,
        description=("Websockets open at once from one client address (loopback counts as one) "
                     "and, separately, for one token; past it a socket is closed with 4429."),
    )
