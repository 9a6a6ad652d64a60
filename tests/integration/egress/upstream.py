"""Upstream servers for the egress tests, run inside the test's own network namespace:
HTTP on 80, HTTPS on 443 (certificate from the test CA), and a TCP echo on 5432. HTTP(S)
answers with the request it received (method, path, headers) as JSON, and appends the same
to a log file, so tests can check what reached the upstream."""
import http.server
import json
import os
import socket
import socketserver
import ssl
import sys
import threading

LOG = sys.argv[1]
CERT, KEY = sys.argv[2], sys.argv[3]
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # answers in two writes; no 40 ms Nagle/delayed-ACK stall

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode("latin-1") if n else ""
        if self.path.startswith("/big/"):
            size = int(self.path[5:])
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk = b"x" * 65536
            while size > 0:
                self.wfile.write(chunk[:min(size, len(chunk))])
                size -= len(chunk)
            return
        rec = {"scheme": "https" if isinstance(self.connection, ssl.SSLSocket) else "http",
               "method": self.command, "path": self.path, "headers": dict(self.headers.items()), "body": body}
        with lock, open(LOG, "a") as f:
            f.write(json.dumps(rec) + "\n")
        # The answer never carries the Authorization value back: a secret the gateway
        # injected must not reach the sandbox through the test's own echo.
        shown = dict(rec, headers={k: (v if k.lower() != "authorization" else "<%d bytes>" % len(v))
                                   for k, v in rec["headers"].items()})
        out = json.dumps(shown).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = handle_any

    def log_message(self, *a):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            d = self.request.recv(65536)
            if not d:
                return
            self.request.sendall(d)


class EchoServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


http_srv = Server(("0.0.0.0", 80), Handler)
https_srv = Server(("0.0.0.0", 443), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
https_srv.socket = ctx.wrap_socket(https_srv.socket, server_side=True)
echo = EchoServer(("0.0.0.0", 5432), Echo)


def udp_logger():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("0.0.0.0", 9999))
    while True:
        d, peer = u.recvfrom(2048)
        with lock, open(LOG, "a") as f:
            f.write(json.dumps({"scheme": "udp", "from": peer[0], "body": d.decode("latin-1")}) + "\n")


threading.Thread(target=udp_logger, daemon=True).start()
for s in (http_srv, https_srv, echo):
    threading.Thread(target=s.serve_forever, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
