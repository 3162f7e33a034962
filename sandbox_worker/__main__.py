"""`python -m sandbox_worker`: serve one evaluation over the protocol fd named in TLX_PROTOCOL_FD."""

from sandbox_worker.server import main

if __name__ == "__main__":
    raise SystemExit(main())
