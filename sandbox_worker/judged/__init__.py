"""Judged mode: the verdict is computed in the worker (the judge), the candidate runs in a process of its own.

`judge` holds inputs, references, comparisons and the clock; `candidate` is the loop the forked candidate
process serves; `slots` lays tensors out in the shared memory both map. docs/security.md says why.
"""
