"""A candidate that tries, at import, to reach the network, write outside its scratch directory and see a GPU,
then raises with what it managed, so the test reads the outcome from the compile report."""

import os
import socket


def _probe() -> str:
    found = []
    try:
        socket.create_connection(("127.0.0.1", int(os.environ["TRITON_COMPILE_AHEAD_TEST_PORT"])), timeout=2).close()
        found.append("network reached")
    except OSError as exc:
        found.append(f"no network ({type(exc).__name__})")
    try:
        with open(os.environ["TRITON_COMPILE_AHEAD_TEST_OUTSIDE"], "w") as handle:
            handle.write("escaped\n")
        found.append("wrote outside")
    except OSError as exc:
        found.append(f"no write outside ({type(exc).__name__})")
    found.append(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}")
    return "; ".join(found)


raise RuntimeError(_probe())
