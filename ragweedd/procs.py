"""Whether a process is alive and whether it holds a listening port: how a client (and the daemon
itself) tells a live daemon's port file from one a crash left behind. Standard library only, since
ragweedctl imports it at start-up."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but another user's: not our daemon
        return True
    return True


def _listening_inode(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                next(f, None)
                for line in f:
                    cols = line.split()
                    # local_address is HEXIP:HEXPORT; state 0A is LISTEN
                    if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(cols[9])
        except OSError:
            continue
    return inodes


def pid_holds_port(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` holds the socket listening on ``port``; None where /proc cannot
    tell (not Linux). Only our own processes' descriptors are readable, so True also says the
    listener runs as us."""
    if not os.path.isdir("/proc/self/fd"):
        return None
    inodes = _listening_inode(port)
    if not inodes:
        return False
    want = {f"socket:[{i}]" for i in inodes}
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in want:
                    return True
            except OSError:
                continue
    except OSError:  # not ours, or gone
        return False
    return False
