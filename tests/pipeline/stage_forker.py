"""A process that imports the torch stack once, then forks real stage runs on request.

Why: a kill/resume test needs many short runs of a stage it can `kill -9`. Starting
`python -m stages.<name>` costs 6-12 s of torch/transformers/TRL imports on the
shared 2-core machine, per run; a forked child of a process that only *imported*
them (no tensor op ran, so no OpenMP pool exists to break across fork) starts in
milliseconds and runs exactly the stage's own `main(argv)`. The child is a normal
process: `kill -9 <pid>` kills it mid-write like any other.

Protocol (one JSON object per line on stdin, one reply per line on stdout):
  {"op": "start", "call": "stages.sft:main", "args": [[...argv...]], "log": path}  -> {"pid": n}
  {"op": "wait", "pid": n}                                                       -> {"pid": n, "rc": code}
A call returning an int exits with it; one returning anything else prints it as a
JSON line (to `log`) and exits 0; an exception prints its traceback and exits 1.
`rc` is the exit code, or minus the signal number for a killed child.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import traceback


def _child(call: str, args: list, log: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdin.close()
    code = 1
    try:
        module, name = call.split(":")
        result = getattr(importlib.import_module(module), name)(*args)
        if isinstance(result, int):
            code = result
        else:
            print(json.dumps(result), flush=True)
            code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the test reads the traceback from the log
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(preload: list[str]) -> None:
    for module in preload:
        importlib.import_module(module)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "start":
            pid = os.fork()
            if pid == 0:
                _child(cmd["call"], cmd["args"], cmd["log"])
            reply = {"pid": pid}
        elif cmd["op"] == "wait":
            _, status = os.waitpid(cmd["pid"], 0)
            reply = {"pid": cmd["pid"], "rc": os.waitstatus_to_exitcode(status)}
        else:
            return
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    serve(sys.argv[1:])
