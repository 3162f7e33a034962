# template: incorrect_variant (orchestrator/preflight/negative_variants.py) appends this file to a copy of the
# template: kernel, after two blank lines, with the argument of the last call replaced by the kernel's public
# template: function names. Lines starting with "# template:" are not appended. Standalone, it wraps nothing.
# ---- tlx-agent validate: negative test. Every public entry function below is wrapped so that its ----
# ---- outputs are wrong; verify must reject this file. Generated, never a candidate.              ----
def _tlx_agent_make_outputs_wrong(names):
    import contextlib
    import functools
    import inspect
    import sys
    import threading

    state = threading.local()

    def library(name):  # only what the kernel or harness already imported: never pay for an import here
        return sys.modules.get(name)

    def is_tensor(value):
        torch = library("torch")
        return torch is not None and isinstance(value, torch.Tensor)

    def shift_tensor(tensor, in_place):
        torch = library("torch")
        if tensor.numel() == 0:
            return tensor
        with torch.no_grad():
            if tensor.dtype == torch.bool:
                return tensor.logical_not_() if in_place else tensor.logical_not()
            if tensor.is_floating_point() or tensor.is_complex():
                delta = 1e-2 * float(tensor.detach().abs().max()) + 1.0
            else:
                delta = 1
            return tensor.add_(delta) if in_place else tensor + delta

    def wrong(value):
        if is_tensor(value):
            try:
                return shift_tensor(value, True)
            except RuntimeError:  # not writable in place (expanded, inference-mode, ...)
                return shift_tensor(value, False)
        numpy = library("numpy")
        if numpy is not None and isinstance(value, numpy.ndarray) and value.size:
            if value.dtype == bool:
                return ~value
            if value.dtype.kind in "fc":
                return value + (1e-2 * float(numpy.abs(value).max()) + 1.0)
            return value + 1
        if isinstance(value, bool):
            return not value
        if isinstance(value, int):
            return value + 1
        if isinstance(value, float):
            return value + 1e-2 * abs(value) + 1.0
        if isinstance(value, list):
            return [wrong(item) for item in value]
        if isinstance(value, tuple):
            items = [wrong(item) for item in value]
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        if isinstance(value, dict):
            return {key: wrong(item) for key, item in value.items()}
        return value

    def tensors_in(value, found):
        if is_tensor(value):
            found.add(id(value))
        elif isinstance(value, (list, tuple)):
            for item in value:
                tensors_in(item, found)
        elif isinstance(value, dict):
            for item in value.values():
                tensors_in(item, found)
        return found

    def snapshot(args, kwargs):
        try:
            return [(t, t.detach().clone()) for t in (*args, *kwargs.values()) if is_tensor(t)]
        except RuntimeError:  # out of memory: only returned values are perturbed
            return []

    def changed(tensor, before):
        torch = library("torch")
        if tensor.shape != before.shape or tensor.dtype != before.dtype:
            return True
        if tensor.is_floating_point() or tensor.is_complex():
            return not bool(torch.isclose(tensor, before, rtol=0.0, atol=0.0, equal_nan=True).all())
        return not bool(torch.equal(tensor, before))

    def wrap(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            if getattr(state, "depth", 0):
                return function(*args, **kwargs)
            state.depth = 1
            try:
                before = snapshot(args, kwargs)
                result = function(*args, **kwargs)
            finally:
                state.depth = 0
            returned = tensors_in(result, set())
            for tensor, copy in before:
                if id(tensor) not in returned and changed(tensor, copy):
                    with contextlib.suppress(RuntimeError):
                        shift_tensor(tensor, True)
            return wrong(result)

        return wrapper

    wrapped = []
    namespace = globals()
    for name in names:
        function = namespace.get(name)
        if inspect.isfunction(function) and function.__module__ == __name__:
            namespace[name] = wrap(function)
            wrapped.append(name)
    return wrapped


TLX_AGENT_NEGATIVE_TEST_WRAPPED = _tlx_agent_make_outputs_wrong([])
del _tlx_agent_make_outputs_wrong
