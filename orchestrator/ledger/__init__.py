"""The run's configuration and its ledger: what a run is asked to do (`config.RunConfig`) and everything it writes
and reads back (the output directory, the journal, the live log, result.json, a finished run's records).

A floor below the packages that use it (bundle, preflight, providers, run, cli): it imports only `protocol`,
`decision` and `text` (tests/test_architecture.py, `LAYERS`).
"""
