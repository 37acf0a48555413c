"""`python -I -S launch.py SOCKET ARGS...`: a toolbox server start through zygote.py. Hands this
process's stdin, stdout and stderr to the zygote listening on SOCKET, which forks the server onto
them, then exits with the server's exit status. Killing this process kills the server. Standard
library only (run with -S: no site, a few milliseconds of CPU)."""

import json
import os
import socket
import sys

with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as zygote:
    zygote.connect(sys.argv[1])
    socket.send_fds(zygote, [json.dumps(sys.argv[2:]).encode()], [0, 1, 2])
    os.close(0)  # the server holds the client's pipes alone: they close when it exits
    os.close(1)
    status = b""
    while chunk := zygote.recv(64):
        status += chunk
sys.exit(int(status) if status else 1)
