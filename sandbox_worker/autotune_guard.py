"""Triton's autotuners inside a worker: pin the run's choice, or (the trusted step) let them run and note the choice.

Long because: it is one patch of one Triton class (`Autotuner`: its run, pruning and timing, in both modes), and
its pieces read each other's state on the tuner object; split, each half would have to know the other's fields.

Installed at setup, before the harness is imported, when the orchestrator sends an autotune setup
(protocol/autotune.py `AutotuneSetup`); a judge's candidate process is forked after that and inherits it.

- "pin" (every worker after the trusted step): where Triton prunes a call's list (it does so only when the call's
  key is not in its cache), the kernel's own pruning runs first; one configuration left is the kernel's own
  choice and goes through (fbtriton still "benchmarks" it: answered here without a launch). More are answered
  with the run's choice for the call's key, matched by the key's arguments by name and the tensors' dtypes
  (what Triton's key is made of), so Triton caches it and never benchmarks. A call whose key has no choice, or
  whose kernel's list no longer holds the chosen configuration, would autotune: it is refused by name
  (`AutotuneRefused`), so no worker re-autotunes and a candidate's own autotune timings never choose anything.
- "tune" (the trusted step, and first-call measurements): the autotune runs, each configuration announced
  (`on_progress`) and its timing kept; under TRITON_INTERPRET=1, where Triton has no benchmarker ("0 active
  drivers"), each configuration is timed here on the CPU instead. Choices made are reused by later autotuner
  objects of the same kernel in this process (a harness that loads the kernel twice does not tune twice).

What this relies on in Triton's `triton.runtime.autotuner.Autotuner`, the same in upstream 3.6 and 3.9 and in
Meta's fbtriton 3.7.4 (TLX): `run(*args, **kwargs)` is every call's way in (fbtriton's C dispatch proxy falls back
to it on a miss, and seeds itself from what `run` chose); `cache` is a dict from the call's key tuple to the
chosen `Config`, consulted before any pruning or benchmark, and a list pruned to one is cached as it is;
`configs`, `keys`, `arg_names` and `nargs` (the call's positional arguments by name, set before pruning) are the
list, the key's argument names and the call's; `prune_configs(kwargs)` (fbtriton: through
`_prune_configs(kwargs, configs)`) prunes; `_bench(*args, config, **meta)` times one configuration through
`do_bench` (a `functools.cached_property`, so an instance attribute replaces it). Triton's key tuple itself is
only read (from `cache`, for the record), never rebuilt. Only the standard library is imported at module level.
"""

from __future__ import annotations

import importlib.abc
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox_worker import autotune_compile

AUTOTUNER_MODULE = "triton.runtime.autotuner"
INTERPRETER_SECONDS_PER_CONFIGURATION = 0.3  # sampling budget of one configuration under the interpreter
INTERPRETER_MIN_SAMPLES, INTERPRETER_MAX_SAMPLES = 3, 50
MAX_KEY_ITEMS = 64
_SCALARS = (bool, int, float, str, type(None))
_PREPARED = "_tlx_autotune_prepared"

_installed: list[Guard] = []  # the guard of this process (the class patch is process-wide)


class AutotuneRefused(RuntimeError):
    """An autotune a pinned worker will not run; the message says which kernel, key and why."""


class AutotuneUnpinnable(RuntimeError):
    """The trusted step cannot write a choice down (a key that is not plain values, an Autotuner it cannot read)."""


def describe_config(config: Any) -> dict[str, Any]:
    """A `triton.Config` as plain values: its kwargs and every launch option it carries, never its hooks."""
    described: dict[str, Any] = {}
    for name, value in sorted(vars(config).items()):
        if name == "pre_hook" or callable(value):
            continue
        described[name] = _plain(value)
    return described


def _plain(value: Any) -> Any:
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return repr(value)[:200]


def encode_key(key: Any) -> list[Any]:
    """Triton's cache key as a JSON list; only plain values can be handed to another process and found again."""
    items = tuple(key) if isinstance(key, tuple) else (key,)
    if len(items) > MAX_KEY_ITEMS or not all(isinstance(item, _SCALARS) for item in items):
        kinds = ", ".join(sorted({type(item).__name__ for item in items if not isinstance(item, _SCALARS)}))
        raise AutotuneUnpinnable(f"its autotune key holds values that cannot be written down ({kinds or 'too many'})")
    return list(items)


def kernel_name(tuner: Any) -> str:
    function = getattr(tuner, "base_fn", None) or getattr(tuner, "fn", None)
    while function is not None and not hasattr(function, "__code__") and hasattr(function, "fn"):
        function = function.fn
    return str(getattr(function, "__name__", type(tuner).__name__))[:200]


def _key_values(tuner: Any, args: tuple[Any, ...], meta: dict[str, Any]) -> dict[str, Any]:
    """The key's arguments of one call, by name (for people: the key itself is Triton's)."""
    named = {**dict(zip(getattr(tuner, "arg_names", ()), args, strict=False)), **meta}
    values: dict[str, Any] = {}
    for name in list(getattr(tuner, "keys", ()) or ())[:MAX_KEY_ITEMS]:
        if name in named:
            value = named[name]
            values[str(name)] = value if isinstance(value, _SCALARS) else repr(value)[:200]
    dtypes = [str(v.dtype).removeprefix("torch.") for v in named.values() if hasattr(v, "dtype")]
    if dtypes:
        values["dtypes"] = ",".join(dtypes)[:200]
    return values


def _median_ms(timing: Any) -> float | None:
    value = timing[0] if isinstance(timing, (list, tuple)) and timing else timing
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0.0 and number != float("inf") and number == number else None


def interpreter_bench(kernel_call: Callable[[], Any], quantiles: Any = None, **_ignored: Any) -> Any:
    """Triton's benchmarker contract (milliseconds; the quantiles asked for, else the median) timed on the CPU,
    for the interpreter, where Triton has none: one warm-up call, then at least a few calls within a budget."""
    from sandbox_worker.harness_kit.sampling import SamplingLimits, collect

    kernel_call()

    def take_sample() -> tuple[float, Any]:
        started = time.perf_counter_ns()
        kernel_call()
        return (time.perf_counter_ns() - started) / 1000.0, None

    limits = SamplingLimits(min_samples=INTERPRETER_MIN_SAMPLES, max_samples=INTERPRETER_MAX_SAMPLES,
                            target_rse=0.02, budget_seconds=INTERPRETER_SECONDS_PER_CONFIGURATION, warmup_seconds=0.0)
    samples_us, _output, _reason, _stats = collect(take_sample, limits)
    samples_ms = sorted(sample / 1000.0 for sample in samples_us)
    if quantiles is None:
        return statistics.median(samples_ms)
    wanted = quantiles if isinstance(quantiles, (list, tuple)) else [quantiles]
    values = [_quantile(samples_ms, float(q)) for q in wanted]
    return values if isinstance(quantiles, (list, tuple)) else values[0]


def _quantile(ordered: list[float], q: float) -> float:
    position = min(max(q, 0.0), 1.0) * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class _Tuning:
    """One autotune in progress (tune mode): what was tried so far."""

    key_values: dict[str, Any]
    started: float
    tried: int = 1
    timings: list[dict[str, Any]] = field(default_factory=list)
    compiled_ahead: dict[str, Any] | None = None  # threads and seconds, or why not (autotune_compile.py)


@dataclass
class Guard:
    mode: str  # "pin" or "tune"
    pins: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]  # kernel -> [(key values, config)]
    interpreter: bool
    on_progress: Callable[[dict[str, Any]], None] | None = None
    case_id: str | None = None  # the trusted step's current case (progress and choices name it)
    phase: Callable[[], str | None] = lambda: None
    counts: dict[str, int] = field(default_factory=lambda: {
        "pinned": 0, "tuned": 0, "configurations_timed": 0, "refused": 0, "single": 0})
    tuned_during: list[str] = field(default_factory=list)
    choices: list[dict[str, Any]] = field(default_factory=list)  # tune mode: every choice made here
    # tune mode: compile a key's list on threads before timing it; off while a first call measures what a
    # user's process pays (Triton alone compiles one configuration at a time)
    compile_ahead: bool = True

    # ---- what a worker reports ------------------------------------------------------------------------

    def activity(self) -> dict[str, Any]:
        return {"mode": self.mode, **self.counts, "tuned_during": list(self.tuned_during)}

    def take_choices(self) -> list[dict[str, Any]]:
        return list(self.choices)

    # ---- the patched Autotuner.run ------------------------------------------------------------------

    def run(self, original: Callable[..., Any], tuner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not tuner.__dict__.get(_PREPARED):
            self._prepare(tuner)
        tuner.__dict__.update(_tlx_pruned=None, _tlx_pinned=False)
        if self.mode != "tune" or not isinstance(getattr(tuner, "cache", None), dict):
            return original(tuner, *args, **kwargs)
        before = set(tuner.cache)
        tuner.__dict__["_tlx_tuning"] = _Tuning(key_values=_key_values(tuner, args, kwargs), started=time.monotonic())
        try:
            return original(tuner, *args, **kwargs)
        finally:
            tuning = tuner.__dict__.pop("_tlx_tuning")
            self._note_choices(tuner, before, tuning)

    def _prepare(self, tuner: Any) -> None:
        tuner.__dict__[_PREPARED] = True
        name = kernel_name(tuner)
        if not isinstance(getattr(tuner, "configs", None), list) or not isinstance(getattr(tuner, "cache", None), dict):
            tuner._bench = self._refusing(tuner, name, "this Triton's Autotuner keeps no `cache` dict and `configs` "
                                                       "list, so its choice cannot be pinned or read")
            return
        # Triton prunes exactly when a call's key is not in its cache: the one place to answer from a choice
        where = "_prune_configs" if callable(getattr(tuner, "_prune_configs", None)) else "prune_configs"
        setattr(tuner, where, self._pruning(tuner, name, getattr(tuner, where)))
        if self.mode == "pin":
            tuner._bench = self._refusing(tuner, name, "the run's autotune step made no choice for this key")
            return
        tuner._bench = self._timing(tuner, name, tuner._bench)
        if self.interpreter:
            try:
                tuner.do_bench = interpreter_bench
            except AttributeError as exc:
                raise AutotuneUnpinnable(f"{name}: cannot give this Triton's Autotuner a CPU benchmarker "
                                         f"({exc})") from None

    def _pruning(self, tuner: Any, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        """The kernel's own pruning, then: one configuration left is the kernel's own choice; more are answered
        from the choice for the call's key (its arguments by name and dtypes), or refused (pin mode), or timed
        (tune mode, the trusted step)."""

        def prune(*args: Any, **kwargs: Any) -> Any:
            pruned = original(*args, **kwargs)
            tuner.__dict__.update(_tlx_pruned=len(pruned), _tlx_pruned_list=list(pruned))
            if len(pruned) <= 1:
                self.counts["single"] += 1
                return pruned
            call_kwargs = args[0] if args and isinstance(args[0], dict) else {}
            key_values = _key_values(tuner, (), {**(getattr(tuner, "nargs", None) or {}), **call_kwargs})
            wanted = next((config for values, config in self.pins.get(name, []) if values == key_values), None)
            chosen = next((c for c in tuner.configs if describe_config(c) == wanted), None) if wanted else None
            if chosen is not None:
                self.counts["pinned"] += 1
                tuner.__dict__.update(_tlx_pruned=1, _tlx_pinned=True)
                return [chosen]
            if self.mode == "tune":
                return pruned
            self.counts["refused"] += 1
            problem = (f"the run chose {_short(wanted)} for it, which this kernel's list of {len(tuner.configs)} "
                       "configurations does not hold" if wanted else "the run's autotune step made no choice for "
                       "this key")
            raise AutotuneRefused(_refusal(name, len(pruned), key_values, problem))

        return prune

    def _refusing(self, tuner: Any, name: str, problem: str) -> Callable[..., Any]:
        """A pinned worker's `_bench`: never times anything."""

        def refuse(*args: Any, config: Any = None, **meta: Any) -> Any:
            if tuner.__dict__.get("_tlx_pruned") == 1:  # one configuration left: nothing to choose, nothing run
                return [0.0, 0.0, 0.0]
            self.counts["refused"] += 1
            listed = len(getattr(tuner, "configs", []) or [])
            raise AutotuneRefused(_refusal(name, tuner.__dict__.get("_tlx_pruned") or listed,
                                           _key_values(tuner, args, meta), problem))

        return refuse

    def _timing(self, tuner: Any, name: str, original_bench: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, config: Any, **meta: Any) -> Any:
            of = int(tuner.__dict__.get("_tlx_pruned") or len(tuner.configs))
            if of == 1:  # fbtriton times a list of one too: there is nothing to choose, so nothing is run
                return [0.0, 0.0, 0.0]
            tuning: _Tuning | None = tuner.__dict__.get("_tlx_tuning")
            index = len(tuning.timings) + 1 if tuning is not None else 1
            if index == 1 and tuning is not None and self.compile_ahead and not self.interpreter:
                self._compile_ahead(tuner, name, args, meta, tuning)
            described = describe_config(config)
            if self.on_progress is not None:
                self.on_progress({"kernel": name, "key": _key_values(tuner, args, meta), "case_id": self.case_id,
                                  "configuration": min(index, of), "of": of, "config": described})
            result = original_bench(*args, config=config, **meta)
            self.counts["configurations_timed"] += 1
            if tuning is not None:
                tuning.tried = of
                tuning.timings.append({"config": described, "median_ms": _median_ms(result)})
            return result

        return timed

    def _compile_ahead(self, tuner: Any, name: str, args: tuple[Any, ...], meta: dict[str, Any],
                       tuning: _Tuning) -> None:
        """Before the first configuration of a key is timed: compile the whole pruned list on threads, so the
        timings that follow compile nothing. Best effort: what fails here is compiled (and fails) as before."""
        configs = tuner.__dict__.get("_tlx_pruned_list") or []
        if len(configs) < 2 or not autotune_compile.available():
            return
        threads = autotune_compile.compile_threads(len(configs))
        if self.on_progress is not None:
            self.on_progress({"kernel": name, "key": _key_values(tuner, args, meta), "case_id": self.case_id,
                              "configuration": 1, "of": len(configs), "config": {}, "compiling_threads": threads})
        try:
            seconds, compiled = autotune_compile.compile_ahead(tuner.fn, configs, args, meta, threads,
                                                               dict(getattr(tuner, "nargs", None) or {}))
        except Exception as exc:  # noqa: BLE001 - the timings then compile one by one, as Triton does
            tuning.compiled_ahead = {"failed": f"{type(exc).__name__}: {exc}"[:200]}
            return
        tuning.compiled_ahead = {"threads": threads, "seconds": seconds, "configurations": len(configs),
                                 "compiled": compiled}

    def _note_choices(self, tuner: Any, before: set[Any], tuning: _Tuning) -> None:
        """After a call in tune mode: a key it timed is a choice (and this process's pin for later objects of the
        kernel); a key answered from such a pin adds the case to that choice."""
        name = kernel_name(tuner)
        if not tuning.timings:
            for choice in self.choices:  # a case whose key an earlier call already chose
                if choice["kernel"] == name and choice["key_values"] == tuning.key_values and self.case_id \
                        and self.case_id not in choice["case_ids"]:
                    choice["case_ids"].append(self.case_id)
            return
        for key in [k for k in tuner.cache if k not in before]:
            config = tuner.cache[key]
            described = describe_config(config)
            self.counts["tuned"] += 1
            phase = self.phase() or "unknown"
            if phase not in self.tuned_during:
                self.tuned_during.append(phase)
            self.pins.setdefault(name, []).append((tuning.key_values, described))  # later objects of this kernel
            measured = next((t["median_ms"] for t in tuning.timings if t["config"] == described), None)
            self.choices.append({
                "kernel": name, "key": encode_key(key), "key_values": tuning.key_values,
                "case_ids": [self.case_id] if self.case_id else [], "config": described,
                "config_index": next((i for i, c in enumerate(tuner.configs) if c is config), None),
                "configs_listed": max(len(tuner.configs), 1), "configs_tried": max(len(tuning.timings), 1),
                "measured_ms": measured, "timings": tuning.timings[:512],
                "seconds": max(time.monotonic() - tuning.started, 0.0),
                "timer": "interpreter_cpu" if self.interpreter else "triton", "compiled_ahead": tuning.compiled_ahead})


def _refusal(name: str, count: int, key_values: dict[str, Any], problem: str) -> str:
    return (f"{name}: autotune over {count} configurations for {_short(key_values)} refused: {problem}; a worker "
            "never autotunes after the run's autotune step (keep the run's choice in the list, or give the kernel "
            "one configuration per key; docs/autotune.md)")


def _short(value: Any) -> str:
    """`BLOCK_SIZE=512 num_warps=4` for a described config, `n_elements=2048 dtypes=...` for key values."""
    if not isinstance(value, dict):
        return str(value)[:300]
    kwargs = value.get("kwargs") if isinstance(value.get("kwargs"), dict) else {}
    pairs = [*kwargs.items(), *((k, v) for k, v in value.items() if k != "kwargs" and v is not None)]
    return " ".join(f"{k}={v}" for k, v in pairs)[:300]


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches the autotuner module the moment it is imported (the harness imports Triton after setup)."""

    def __init__(self, patch: Callable[[Any], None]) -> None:
        self.patch = patch

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != AUTOTUNER_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader.exec_module = _then(spec.loader.exec_module, self.patch)
                return spec
        return None


def _then(exec_module: Callable[[Any], None], patch: Callable[[Any], None]) -> Callable[[Any], None]:
    def run(module: Any) -> None:
        exec_module(module)
        patch(module)

    return run


def _patch_module(module: Any) -> None:
    autotuner = getattr(module, "Autotuner", None)
    if autotuner is None or getattr(autotuner.run, "_tlx_guarded", False):
        return
    original = autotuner.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        guard = installed()
        return guard.run(original, self, args, kwargs) if guard is not None else original(self, *args, **kwargs)

    run._tlx_guarded = True  # type: ignore[attr-defined]
    autotuner.run = run
    for finder in [f for f in sys.meta_path if isinstance(f, _PatchOnImport)]:
        sys.meta_path.remove(finder)


def install(setup: dict[str, Any], *, interpreter: bool,
            on_progress: Callable[[dict[str, Any]], None] | None = None,
            phase: Callable[[], str | None] = lambda: None) -> Guard:
    """Guard every Triton autotuner of this process (and of processes forked from it) as `setup` says."""
    pins: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for pin in setup.get("pins") or []:
        pins.setdefault(str(pin["kernel"]), []).append((dict(pin["key_values"]), dict(pin["config"])))
    guard = Guard(mode=str(setup.get("mode", "pin")), pins=pins, interpreter=interpreter, on_progress=on_progress,
                  phase=phase)
    _installed[:] = [guard]
    module = sys.modules.get(AUTOTUNER_MODULE)
    if module is not None:
        _patch_module(module)
    elif not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport(_patch_module))
    return guard


def sanitized_activity(value: Any) -> dict[str, Any] | None:
    """Another process's `Guard.activity()` (a judge's candidate process) reduced to its known fields, or None."""
    if not isinstance(value, dict) or value.get("mode") not in ("pin", "tune"):
        return None
    counts = {name: value.get(name) for name in ("pinned", "tuned", "configurations_timed", "refused", "single")}
    if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 31 for n in counts.values()):
        return None
    phases = value.get("tuned_during")
    phases = [str(p)[:200] for p in phases[:16]] if isinstance(phases, list) else []
    return {"mode": value["mode"], **counts, "tuned_during": phases}


def installed() -> Guard | None:
    """The guard of this process (a judge's candidate process inherits the worker's), or None."""
    return _installed[0] if _installed else None
