"""A simulated WAN for benchmarks: two network namespaces joined by delay_link.

    with Wan(bazel_bin, rtt_ms=25) as wan:
        wan.run(wan.CLIENT, ["curl", ...])       # 10.77.0.1, the callers' side
        wan.spawn(wan.SERVER, ["nginx", ...])    # 10.77.0.2, the upstreams' side

Everything it makes (namespaces, TUN devices, the link process, processes it spawned) is
gone when the `with` block ends. Traffic stays inside the two namespaces: each has only
loopback and the link to the other.
"""

import os
import signal
import subprocess
import tempfile
import time

CLIENT_ADDRESS = "10.77.0.1"
SERVER_ADDRESS = "10.77.0.2"


class Wan:
    def __init__(self, delay_link, rtt_ms):
        suffix = f"{os.getpid()}-{int(time.monotonic() * 1000) % 100000}"
        self.CLIENT = f"egress-wan-c-{suffix}"
        self.SERVER = f"egress-wan-s-{suffix}"
        self._delay_link = delay_link
        self._one_way_us = int(rtt_ms * 1000 / 2)
        self._processes = []
        self._link = None

    def __enter__(self):
        try:
            for ns in (self.CLIENT, self.SERVER):
                subprocess.run(["ip", "netns", "add", ns], check=True)
            self._link = subprocess.Popen(
                [self._delay_link, f"--netns_a={self.CLIENT}", f"--netns_b={self.SERVER}",
                 "--device=wan0", f"--one_way_delay_us={self._one_way_us}"],
                stdout=subprocess.PIPE, text=True)
            if self._link.stdout.readline().strip() != "ready":
                raise RuntimeError("delay_link did not start")
            for ns, local, peer in ((self.CLIENT, CLIENT_ADDRESS, SERVER_ADDRESS),
                                    (self.SERVER, SERVER_ADDRESS, CLIENT_ADDRESS)):
                for command in (["link", "set", "lo", "up"],
                                ["addr", "add", local, "peer", peer, "dev", "wan0"],
                                ["link", "set", "wan0", "up"]):
                    subprocess.run(["ip", "-n", ns, *command], check=True)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for process in reversed(self._processes):
            stop(process)
        if self._link:
            stop(self._link)
        for ns in (self.CLIENT, self.SERVER):
            subprocess.run(["ip", "netns", "delete", ns], stderr=subprocess.DEVNULL)
        return False

    def command(self, ns, argv):
        return ["ip", "netns", "exec", ns, *argv]

    def run(self, ns, argv, **kwargs):
        """Runs argv in namespace ns to its end; returns the CompletedProcess."""
        return subprocess.run(self.command(ns, argv), **kwargs)

    def spawn(self, ns, argv, **kwargs):
        """Starts argv in namespace ns; it is stopped when the Wan closes, if not before."""
        process = subprocess.Popen(self.command(ns, argv), **kwargs)
        self._processes.append(process)
        return process

    def wait_for_port(self, ns, address, port, seconds=10):
        probe = ("import socket,sys,time\n"
                 f"end=time.monotonic()+{seconds}\n"
                 "while True:\n"
                 f"  try: socket.create_connection(('{address}',{port}),1).close(); break\n"
                 "  except OSError:\n"
                 "    if time.monotonic()>end: sys.exit(1)\n"
                 "    time.sleep(0.05)\n")
        self.run(ns, ["/usr/bin/python3", "-c", probe], check=True)


def readable_tempdir(prefix, parent=None):
    """A new directory that servers dropping root (nginx's workers) can read."""
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    os.chmod(path, 0o755)
    return path


def stop(process, seconds=10):
    """SIGTERM, then SIGKILL if it lingers."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# The start of each server script: one connection accepted on port 7777.
_ACCEPT = """
import socket, time
server = socket.socket()
server.bind(('{address}', 7777))
server.listen()
print('listening', flush=True)
connection, _ = server.accept()
"""

_RECEIVER = _ACCEPT + """
buffer = bytearray(1 << 20)
total, start = 0, time.monotonic()
while True:
    n = connection.recv_into(buffer)
    if not n:
        break
    total += n
print(total / (time.monotonic() - start) / 1e6)
"""

_SENDER = """
import socket, time
connection = socket.create_connection(('{address}', 7777))
chunk = bytes(1 << 20)
end = time.monotonic() + {seconds}
while time.monotonic() < end:
    connection.sendall(chunk)
connection.close()
"""


def _across(wan, server_script, client_script):
    """Runs a Python server script in the server namespace (it prints a line once it
    listens) and a client script in the client namespace; returns both their outputs."""
    server = wan.spawn(wan.SERVER, ["/usr/bin/python3", "-c", server_script],
                       stdout=subprocess.PIPE, text=True)
    server.stdout.readline()
    client = wan.run(wan.CLIENT, ["/usr/bin/python3", "-c", client_script],
                     stdout=subprocess.PIPE, text=True, check=True)
    return server.stdout.read(), client.stdout


def measure_throughput(wan, seconds=5):
    """MB/s of one TCP stream from the client namespace to the server namespace."""
    received, _ = _across(wan, _RECEIVER.format(address=SERVER_ADDRESS),
                          _SENDER.format(address=SERVER_ADDRESS, seconds=seconds))
    return float(received)


_ECHO = _ACCEPT + """
connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    data = connection.recv(64)
    if not data:
        break
    connection.sendall(data)
"""

_PING = """
import socket, statistics, time
connection = socket.create_connection(('{address}', 7777))
connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
times = []
for _ in range({count}):
    start = time.perf_counter()
    connection.sendall(b'x')
    connection.recv(64)
    times.append((time.perf_counter() - start) * 1000)
print(statistics.median(times))
"""


def measure_rtt_ms(wan, count=100):
    """The median round trip of one byte over an open TCP connection across the link:
    the delay, plus what waking the link and the endpoints costs on this machine."""
    _, ping = _across(wan, _ECHO.format(address=SERVER_ADDRESS),
                      _PING.format(address=SERVER_ADDRESS, count=count))
    return float(ping)
