"""The sandboxed worker: one short-lived process per evaluation.

Standard library only (plus, lazily, what the harness imports). It never imports the orchestrator or
`protocol`; its message shapes mirror `protocol.worker` and are checked there.
"""
