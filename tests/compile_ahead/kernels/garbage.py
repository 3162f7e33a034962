"""A candidate that writes a line that is no event into every pipe it holds at import: the compile child's
result channel among them."""

import os
import stat

for name in os.listdir("/proc/self/fd"):
    try:
        if stat.S_ISFIFO(os.fstat(int(name)).st_mode):
            os.write(int(name), b'{"event": "result", "index": 0, "status": "compiled", "shared": 0}\nnot json\n')
    except OSError:
        pass
