#!/usr/bin/env python3
"""The cluster network of `scripts/realcluster up --knative`, without root, DNS or a CNI.

On a cluster every Knative program is a pod with a network namespace of its own, and every hop of
the data plane is a cluster-local Service name. Here:

  proxy  (on the host) an HTTP forward proxy on 127.0.0.1:PORT that routes by host name
         (`broker-ingress.knative-eventing.svc.cluster.local`, `<x>-kn-channel.<ns>.svc...`,
         `el-<name>.<ns>.svc...:8080`) to the local port or unix socket that serves it, as the
         routes file says; it logs every request (method, host, path, status, CloudEvent id and
         type) as one JSON line. It also serves DIR/host-<port>.sock for each --host-port: a unix
         socket forwarded to 127.0.0.1:<port> on the host (the API server, the proxy itself).
  pod    (inside `unshare --user --map-root-user --net --uts`) brings lo up, takes the pod's
         host name (knative's leader election names its holder by it), listens on
         127.0.0.1:<port> for each --host-port and forwards to DIR/host-<port>.sock (so the
         program reaches the API server and the proxy at the host's addresses), serves each
         --expose port of the namespace on DIR/pods/<name>-<port>.sock for the proxy, then runs
         the program and exits with its status.

Filesystem sockets cross network namespaces; TCP ports do not. Standard library only.
"""

import argparse
import asyncio
import fcntl
import fnmatch
import json
import os
import signal
import socket
import struct
import sys
import time

CLUSTER_SUFFIX = ".cluster.local"
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "upgrade"}


def fail(msg):
    print("realcluster-net: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            if writer.can_write_eof():
                writer.write_eof()
        except (ConnectionError, OSError):
            writer.close()


def forwarder(connect, what):
    """A connection handler that splices the accepted stream with a new one from `connect()`."""

    async def handle(reader, writer):
        try:
            up_reader, up_writer = await connect()
        except OSError as e:
            print(f"realcluster-net: cannot reach {what}: {e}", file=sys.stderr, flush=True)
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        up_writer.close()
        writer.close()

    return handle


def unix_path(path):
    if os.path.exists(path):
        os.unlink(path)
    return path


# --- proxy -------------------------------------------------------------------------------------


def normal_host(host):
    """`name.ns.svc.cluster.local:80` -> `name.ns.svc`, `...:8080` keeps its port."""
    name, _, port = host.partition(":")
    name = name.lower().rstrip(".")
    if name.endswith(CLUSTER_SUFFIX):
        name = name[: -len(CLUSTER_SUFFIX)]
    return name if port in ("", "80") else f"{name}:{port}"


def route_of(routes_file, host):
    """The target (`unix:PATH` or `tcp:HOST:PORT`) of the first route whose pattern matches."""
    try:
        lines = open(routes_file).read().splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and fnmatch.fnmatchcase(host, parts[0]):
            return parts[1]
    return None


async def read_head(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    return lines[0], [tuple(part.strip() for part in l.split(":", 1)) for l in lines[1:] if ":" in l]


async def read_body(reader, headers):
    """The request body as sent (chunked framing kept)."""
    h = {k.lower(): v for k, v in headers}
    if "chunked" in h.get("transfer-encoding", "").lower():
        out = b""
        while True:
            size_line = await reader.readuntil(b"\r\n")
            out += size_line
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:
                    trailer = await reader.readuntil(b"\r\n")
                    out += trailer
                    if trailer == b"\r\n":
                        return out
            out += await reader.readexactly(size + 2)
    length = int(h.get("content-length", "0") or 0)
    return await reader.readexactly(length) if length else b""


def event_of(headers, body):
    h = {k.lower(): v for k, v in headers}
    if h.get("ce-id"):
        return h.get("ce-id"), h.get("ce-type", "")
    if h.get("content-type", "").startswith("application/cloudevents+json"):
        try:
            e = json.loads(body)
            return e.get("id", ""), e.get("type", "")
        except ValueError:
            pass
    return "", ""


async def open_target(target):
    kind, _, rest = target.partition(":")
    if kind == "unix":
        return await asyncio.open_unix_connection(rest)
    host, _, port = rest.rpartition(":")
    return await asyncio.open_connection(host, int(port))


class Proxy:
    def __init__(self, routes, log):
        self.routes = routes
        self.log = open(log, "a", buffering=1)

    def record(self, **entry):
        entry["answered"] = round(time.time(), 6)
        self.log.write(json.dumps(entry, sort_keys=True) + "\n")

    async def handle(self, reader, writer):
        try:
            await self.one(reader, writer)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def answer(self, writer, status, text):
        body = (text + "\n").encode()
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n".encode() + body
        )
        await writer.drain()

    async def one(self, reader, writer):
        """One request a connection: the answer says `Connection: close`, so a client never
        reuses a connection the proxy is about to close."""
        request_line, headers = await read_head(reader)
        start = round(time.time(), 6)
        method, target, version = request_line.split(" ", 2)
        body = await read_body(reader, headers)
        host = next((v for k, v in headers if k.lower() == "host"), "")
        path = target
        if target.startswith("http://"):
            authority, slash, rest = target[len("http://"):].partition("/")
            host, path = authority, (slash + rest) or "/"
        elif method == "CONNECT":
            await self.answer(writer, "405 Method Not Allowed", "this proxy routes plain HTTP only")
            return
        ce_id, ce_type = event_of(headers, body)
        # `received` orders the hops of one event (each hop is answered only after the next one
        # when a program forwards synchronously).
        entry = dict(method=method, host=host, path=path, ce_id=ce_id, ce_type=ce_type, received=start)
        route = route_of(self.routes, normal_host(host))
        if route is None:
            self.record(status=502, error="no route", **entry)
            await self.answer(writer, "502 Bad Gateway", f"realcluster-net: no route for host {host}")
            return
        try:
            up_reader, up_writer = await open_target(route)
        except OSError as e:
            self.record(status=502, error=f"{route}: {e}", **entry)
            await self.answer(writer, "502 Bad Gateway", f"realcluster-net: {host} ({route}): {e}")
            return
        out = [f"{method} {path} {version}"]
        out += [f"{k}: {v}" for k, v in headers if k.lower() not in HOP_BY_HOP]
        out += ["Connection: close", "", ""]
        up_writer.write("\r\n".join(out).encode("latin-1") + body)
        await up_writer.drain()
        status_line, up_headers = await read_head(up_reader)
        status = int(status_line.split(" ")[1])
        self.record(status=status, upstream=route, **entry)
        back = [status_line] + [f"{k}: {v}" for k, v in up_headers if k.lower() not in HOP_BY_HOP]
        back += ["Connection: close", "", ""]
        writer.write("\r\n".join(back).encode("latin-1"))
        # The rest as it comes: the upstream closes after it (the request said `close`).
        await pipe(up_reader, writer)
        up_writer.close()


async def run_proxy(args):
    os.makedirs(args.dir, exist_ok=True)
    proxy = Proxy(args.routes, args.log)
    servers = [await asyncio.start_server(proxy.handle, "127.0.0.1", args.port)]
    for port in args.host_port:
        connect = lambda port=port: asyncio.open_connection("127.0.0.1", port)
        path = unix_path(os.path.join(args.dir, f"host-{port}.sock"))
        servers.append(await asyncio.start_unix_server(forwarder(connect, f"127.0.0.1:{port}"), path))
    print(f"realcluster-net: proxy on 127.0.0.1:{args.port}, routes {args.routes}, log {args.log}", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


# --- pod ---------------------------------------------------------------------------------------


def loopback_up():
    """`ip link set lo up`, as the ioctl it is (SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifreq = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, ifreq))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 0x1))
    finally:
        s.close()


async def run_pod(args):
    if not args.command:
        fail("pod: give the program after --")
    try:
        loopback_up()
        if args.hostname:
            socket.sethostname(args.hostname)
    except OSError as e:
        fail(f"pod {args.name}: cannot bring lo up or set the host name ({e}); run it inside "
             "`unshare --user --map-root-user --net --uts`")
    servers = []
    for port in args.host_port:
        path = os.path.join(args.dir, f"host-{port}.sock")
        if not os.path.exists(path):
            fail(f"pod {args.name}: {path} does not exist (is the proxy running?)")
        connect = lambda path=path: asyncio.open_unix_connection(path)
        try:
            servers.append(await asyncio.start_server(forwarder(connect, path), "127.0.0.1", port))
        except OSError as e:
            fail(f"pod {args.name}: cannot listen on 127.0.0.1:{port} in its namespace: {e}")
    os.makedirs(os.path.join(args.dir, "pods"), exist_ok=True)
    for port in args.expose:
        connect = lambda port=port: asyncio.open_connection("127.0.0.1", port)
        path = unix_path(os.path.join(args.dir, "pods", f"{args.name}-{port}.sock"))
        servers.append(await asyncio.start_unix_server(forwarder(connect, f"{args.name}:{port}"), path))
    try:
        child = await asyncio.create_subprocess_exec(*args.command, stdin=asyncio.subprocess.DEVNULL)
    except OSError as e:
        fail(f"pod {args.name}: cannot run {args.command[0]}: {e}")
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda sig=sig: child.returncode is None and child.send_signal(sig))
    code = await child.wait()
    for s in servers:
        s.close()
    return code


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    px = sub.add_parser("proxy")
    px.add_argument("--dir", required=True, help="where the unix sockets live")
    px.add_argument("--port", type=int, required=True)
    px.add_argument("--routes", required=True, help="lines `HOST-PATTERN unix:PATH|tcp:HOST:PORT`")
    px.add_argument("--log", required=True)
    px.add_argument("--host-port", type=int, action="append", default=[])
    pod = sub.add_parser("pod")
    pod.add_argument("--dir", required=True)
    pod.add_argument("--name", required=True)
    pod.add_argument("--hostname", help="the pod's host name (its POD_NAME)")
    pod.add_argument("--host-port", type=int, action="append", default=[])
    pod.add_argument("--expose", type=int, action="append", default=[])
    pod.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    if args.cmd == "proxy":
        asyncio.run(run_proxy(args))
    else:
        if args.command and args.command[0] == "--":
            args.command = args.command[1:]
        code = asyncio.run(run_pod(args))
        sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
