"""Runs inside a sandbox (python3 of the `base` template): the server the preview-port tests
reach. GET /headers answers the request's headers as JSON (so a test can see what reached the
sandbox), /sse streams two events with a pause the test controls (the second waits for the
file /tmp/go), /ws is a WebSocket echo (RFC 6455, text and binary, unfragmented), and / a page
whose script talks to /ws and writes the echo into the page (the browser test reads it);
/blob/N answers N bytes (the benchmark).
Standard library only."""
import base64
import hashlib
import http.server
import json
import os
import socketserver
import struct
import sys
import time

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PAGE = b"""<!doctype html><html><head><title>preview</title></head><body>
<h1 id="title">served from inside the sandbox</h1><p id="echo">waiting</p>
<script src="/app.js"></script></body></html>"""
SCRIPT = b"""const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws');
ws.onopen = () => ws.send('hello from the page');
ws.onmessage = (e) => { document.getElementById('echo').textContent = 'echo: ' + e.data; };
ws.onerror = () => { document.getElementById('echo').textContent = 'websocket error'; };
"""


def recv_exact(f, n):
    data = b""
    while len(data) < n:
        chunk = f.read(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall between

    def log_message(self, *args):
        pass

    def send_body(self, ctype, body):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/headers":
            return self.send_body("application/json", json.dumps(dict(self.headers.items())).encode())
        if self.path.startswith("/blob/"):
            # n bytes, written in 1 MiB pieces (throughput benchmarks).
            n = int(self.path[len("/blob/"):])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            piece = b"x" * (1 << 20)
            while n > 0:
                self.wfile.write(piece[:n])
                n -= min(n, len(piece))
            return
        if self.path == "/app.js":
            return self.send_body("text/javascript", SCRIPT)
        if self.path == "/sse":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def chunk(b):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
                self.wfile.flush()
            chunk(b"data: first\n\n")
            while not os.path.exists("/tmp/go"):
                time.sleep(0.05)
            chunk(b"data: second\n\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
            return self.websocket()
        return self.send_body("text/html", PAGE)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        return self.send_body("application/octet-stream", hashlib.sha256(body).hexdigest().encode())

    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        try:
            while True:
                b0, b1 = recv_exact(self.rfile, 2)
                op, n = b0 & 0x0F, b1 & 0x7F
                if n == 126:
                    n = struct.unpack(">H", recv_exact(self.rfile, 2))[0]
                elif n == 127:
                    n = struct.unpack(">Q", recv_exact(self.rfile, 8))[0]
                mask = recv_exact(self.rfile, 4) if b1 & 0x80 else b"\0\0\0\0"
                data = bytes(c ^ mask[i % 4] for i, c in enumerate(recv_exact(self.rfile, n)))
                if op == 8:
                    self.wfile.write(b"\x88\x00")
                    return
                if op in (1, 2):
                    head = bytes([0x80 | op])
                    if len(data) < 126:
                        head += bytes([len(data)])
                    elif len(data) < 65536:
                        head += b"\x7e" + struct.pack(">H", len(data))
                    else:
                        head += b"\x7f" + struct.pack(">Q", len(data))
                    self.wfile.write(head + data)
                    self.wfile.flush()
        except (EOFError, ConnectionError):
            return
        finally:
            self.close_connection = True


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


if __name__ == "__main__":
    Server(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
