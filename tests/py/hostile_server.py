"""A stdio MCP server that tries what a compromised package would, each attempt a tool that says
what happened instead of crashing: read a file (the gateway's vault, a file outside its paths),
write a file, connect to a TCP port on loopback, fork without bound, allocate memory, ask the kernel for a new namespace, a keystroke pushed
into a terminal, an x32 system call, signal the gateway (or another process), leave a daemon behind
that ignores SIGTERM and SIGHUP, spin on the CPU, read its ancestors' command lines. Written on
the official Python SDK's `MCPServer` (`@mcp.tool()`), run over stdio.

Each tool answers JSON: `{"ok": true, ...}` when the attempt worked, `{"ok": false, "error":
"<exception type>: <message>"}` when it was refused.

Usage: hostile_server.py     (stdio)
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal as signals
import socket
import termios
import time

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("hostile")


def refused(e: BaseException) -> str:
    return json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"})


@mcp.tool()
def read_file(path: str) -> str:
    """Reads a file."""
    try:
        with open(path) as f:
            return json.dumps({"ok": True, "content": f.read(200)})
    except Exception as e:  # noqa: BLE001 - the refusal is the answer
        return refused(e)


@mcp.tool()
def write_file(path: str, text: str) -> str:
    """Writes a file."""
    try:
        with open(path, "w") as f:
            f.write(text)
        return json.dumps({"ok": True})
    except Exception as e:  # noqa: BLE001
        return refused(e)


@mcp.tool()
def connect(port: int) -> str:
    """Opens a TCP connection to 127.0.0.1:port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            return json.dumps({"ok": True})
    except Exception as e:  # noqa: BLE001
        return refused(e)


@mcp.tool()
def fork_many(count: int) -> str:
    """Forks `count` children that sleep a second; says how many it got before a refusal."""
    started, error = 0, None
    pids = []
    for _ in range(count):
        try:
            pid = os.fork()
        except Exception as e:  # noqa: BLE001
            error = f"{type(e).__name__}: {e}"
            break
        if pid == 0:
            time.sleep(1)
            os._exit(0)
        pids.append(pid)
        started += 1
    # Reaped within a deadline: a child forked from this threaded process can hang before its
    # first line runs (a lock another thread held at the fork), and a stuck one must not hold the
    # answer past the gateway's deadline.
    deadline = time.monotonic() + 10
    waiting = set(pids)
    while waiting and time.monotonic() < deadline:
        for pid in list(waiting):
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    waiting.discard(pid)
            except ChildProcessError:
                waiting.discard(pid)
        time.sleep(0.05)
    for pid in waiting:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    return json.dumps({"ok": error is None, "started": started, "error": error, "stuck": len(waiting)})


@mcp.tool()
def allocate(megabytes: int) -> str:
    """Allocates and touches `megabytes` of memory."""
    try:
        block = bytearray(megabytes * 1024 * 1024)
        block[::4096] = b"x" * len(block[::4096])
        return json.dumps({"ok": True, "bytes": len(block)})
    except Exception as e:  # noqa: BLE001
        return refused(e)


def reap_or_kill(pid: int, seconds: float) -> None:
    """Waits for the child `pid` at most `seconds`, then kills it and waits for it."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)


@mcp.tool()
def kernel(what: str) -> str:
    """Asks the kernel for something no server needs: `new_user_namespace` (clone with
    CLONE_NEWUSER, the usual first step of a kernel exploit), `push_keystroke` (TIOCSTI on its
    stdin), `x32_call` (getpid by its x32 number). Answers the errno name of the refusal."""
    # PyDLL keeps the GIL across the call: a CDLL call releases it, and a child cloned while
    # another thread of this server took it would wait for it for ever (that thread is not in
    # the child), and this tool with it.
    libc = ctypes.PyDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if what == "new_user_namespace":
        # clone(CLONE_NEWUSER | SIGCHLD) with no new stack behaves like fork.
        ret = libc.syscall(ctypes.c_long(56), ctypes.c_ulong(0x10000000 | 17), None, None, None, None)
        if ret == 0:
            os._exit(0)
        if ret > 0:
            reap_or_kill(ret, 10)
    elif what == "push_keystroke":
        ret = libc.ioctl(ctypes.c_int(0), ctypes.c_ulong(termios.TIOCSTI), ctypes.c_char_p(b"x"))
    elif what == "x32_call":
        ret = libc.syscall(ctypes.c_long(0x40000000 | 39))
    else:
        return json.dumps({"ok": False, "error": f"unknown: {what}"})
    if ret >= 0:
        return json.dumps({"ok": True})
    return json.dumps({"ok": False, "error": errno.errorcode.get(ctypes.get_errno(), "?")})


@mcp.tool()
def whereami() -> str:
    """Says the process's HOME, working folder and pid."""
    return json.dumps({"ok": True, "home": os.environ.get("HOME"), "cwd": os.getcwd(), "pid": os.getpid()})


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        # The command may hold spaces and parentheses: the fields follow the last ')'.
        return int(f.read().rsplit(")", 1)[1].split()[1])


def ancestors(depth: int) -> list[int]:
    out, pid = [], os.getpid()
    for _ in range(depth):
        pid = parent_of(pid)
        if pid <= 1:
            break
        out.append(pid)
    return out


@mcp.tool()
def signal(pid: int, sig: int) -> str:
    """Sends signal `sig` to process `pid`."""
    try:
        os.kill(pid, sig)
        return json.dumps({"ok": True})
    except Exception as e:  # noqa: BLE001
        return refused(e)


@mcp.tool()
def signal_ancestors(sig: int, depth: int) -> str:
    """Sends signal `sig` to each of its `depth` nearest ancestors (the supervisor, the gateway),
    found through /proc; `ok` only when every one was signalled."""
    tried = []
    for pid in ancestors(depth):
        try:
            os.kill(pid, sig)
            tried.append({"pid": pid, "ok": True})
        except Exception as e:  # noqa: BLE001
            tried.append({"pid": pid, "ok": False, "error": f"{type(e).__name__}: {e}"})
    return json.dumps({"ok": bool(tried) and all(t["ok"] for t in tried), "tried": tried})


@mcp.tool()
def daemon(pidfile: str) -> str:
    """Leaves a daemon behind: forks twice, starts a session of its own, ignores SIGTERM and
    SIGHUP, writes its pid to `pidfile` and sleeps for ever."""
    first = os.fork()
    if first == 0:
        try:
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            signals.signal(signals.SIGTERM, signals.SIG_IGN)
            signals.signal(signals.SIGHUP, signals.SIG_IGN)
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            with open(pidfile + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(pidfile + ".tmp", pidfile)
            while True:
                time.sleep(3600)
        finally:
            os._exit(0)
    os.waitpid(first, 0)
    for _ in range(100):
        if os.path.exists(pidfile):
            with open(pidfile) as f:
                return json.dumps({"ok": True, "pid": int(f.read())})
        time.sleep(0.05)
    return json.dumps({"ok": False, "error": "the daemon wrote no pid"})


@mcp.tool()
def spin(seconds: float) -> str:
    """Uses the CPU for `seconds` of wall time."""
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return json.dumps({"ok": True, "loops": n})


@mcp.tool()
def cmdlines(depth: int) -> str:
    """Its own command line and its `depth` nearest ancestors'."""
    out = []
    for pid in [os.getpid(), *ancestors(depth)]:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out.append(f.read().replace(b"\0", b" ").decode(errors="replace"))
        except Exception as e:  # noqa: BLE001
            out.append(f"{type(e).__name__}: {e}")
    return json.dumps({"ok": True, "cmdlines": out})


if __name__ == "__main__":
    mcp.run()
