"""`tlx-agent optimize --resume OUT`: continue a run whose orchestrator died, from what it recorded.

`record` reads the output directory back and refuses what cannot be honoured; `rebuild` turns the finished
records into the loop's state with the loop's own functions; `aside` moves the unfinished experiment's
artifacts out of the way. The loop (`orchestrator/run/loop.py`) then goes on where the records end.
"""
