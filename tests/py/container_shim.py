"""A stand-in for `docker` where no container engine runs (CI machines without one): it accepts
`run` with the flags mcpgate passes, writes them to `$CONTAINER_SHIM_LOG` (one JSON array per
start), checks the ones a sandboxed start must carry, and then runs the command that follows the
image on this host, with the variables the `-e NAME` flags name, so the server's stdio goes
through this process as it would through `docker run -i`. It is not isolation; the e2e test
says so, and checks only what mcpgate asks of the runtime.
"""

import json
import os
import sys

args = sys.argv[1:]
log = os.environ.get("CONTAINER_SHIM_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps(args) + "\n")
if not args or args[0] != "run":
    sys.exit("container_shim: only `run` is known")
needed = ["-i", "--rm", "--read-only", "--cap-drop", "--security-opt"]
missing = [flag for flag in needed if flag not in args]
if missing:
    sys.exit(f"container_shim: missing {missing}")
# Flags that take a value, then the image, then the command.
with_value = {"--network", "--cap-drop", "--security-opt", "--tmpfs", "-v", "-w", "-e"}
i, env, workdir = 1, {}, None
while i < len(args) and args[i].startswith("-") and args[i] != "--":
    flag = args[i]
    if flag in with_value:
        value = args[i + 1]
        if flag == "-e":
            name, _, given = value.partition("=")
            env[name] = given if "=" in value else os.environ.get(name, "")
        if flag == "-w":
            workdir = value
        i += 2
    else:
        i += 1
# `--` ends the runtime's options, as it does for docker and podman.
if i < len(args) and args[i] == "--":
    i += 1
image, command = args[i], args[i + 1 :]
if workdir:
    os.chdir(workdir)
os.execvpe(command[0], command, {**{k: v for k, v in os.environ.items() if k in ("PATH",)}, **env})
