"""The HTTP edge: the Starlette app and everything a request meets before the GraphQL schema.

Transport rules, tokens and their throttle, host and origin guards, the body
limit, static files and a prompt shutdown. The schema (``kinflow.schema``)
never sees a raw request; this package never holds a workflow rule.
"""
