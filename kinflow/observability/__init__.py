"""Observability (docs/observability.md): Prometheus metrics, OpenTelemetry traces, JSON logs.

The shell calls in here with one line at each place worth watching (an API
operation, an engine verb, a commit, a lake round trip, a heartbeat pass, an
effect handler, the change hub); the core never does. Each hook is a few
attribute reads when metrics and tracing are off.

* ``switch``: what is on (metrics by default; tracing when an exporter is set);
* ``configuration``: sets the switch from the settings and the environment;
* ``metrics``: every metric and the registry ``/metrics`` serves;
* ``tracing``: the tracer provider, from the standard ``OTEL_*`` variables;
* ``context``: the ids a log line or span carries (operation, instance, root, ...);
* ``operations``: the GraphQL operation hook (a strawberry extension);
* ``engine``: engine verbs, propagation rounds, commits, loads and the family's trace
  links (a spawn to its children, a parent's round to the children it observed);
* ``grouping``: each member of a group commit traced in its own caller's trace;
* ``lake_events``: lake round trips (a pymongo command listener);
* ``work``: heartbeat passes, effect handlers and the change hub;
* ``gauges``: what is read at scrape time (hub, embedded lake, cohorts, backlog);
* ``endpoint``: the ``/metrics`` route and its own port;
* ``logs``: ``KINFLOW_LOG_FORMAT=json`` logging.
"""

from kinflow.observability.configuration import configure

__all__ = ["configure"]
