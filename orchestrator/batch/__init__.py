"""`tlx-agent batch`: many optimize jobs from one manifest, each its own process, recorded in DIR/batch.json.

manifest (read and resolve), options (job options as optimize flags), policy (pure decisions), outcome (what a
finished job amounts to), job (run one), ledger (batch.json), gpus, local (the default engine), dask_engine
(jobs on a Dask cluster), engine (which of the two runs the unfinished jobs). The subcommand is
orchestrator/cli/batch.py; nothing here imports the command line. docs/batch.md describes the whole.
"""
