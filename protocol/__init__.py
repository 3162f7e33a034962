"""Pydantic v2 models for every boundary of tlx-agent.

`bundle` holds what the user gives us (cases, target, budget), `profile` the structured profile
request (and the profile documents), `worker` the JSON-lines messages exchanged with a sandboxed
worker, and `results` what a run writes; `manifest` (run.json), `journal` (journal.jsonl), `lock`
(bundle.lock.json) and `errors` (the error document) the rest. `schema` names each document by the
file it is written to. The worker itself never imports this package (it is standard library only);
the orchestrator validates every line the worker sends against these models.
"""

from protocol.bundle import Budget, Case, Target, load_budget_file, load_cases_file, load_target_file
from protocol.profile import ProfileRequest

__all__ = [
    "Budget",
    "Case",
    "ProfileRequest",
    "Target",
    "load_budget_file",
    "load_cases_file",
    "load_target_file",
]
