"""A small WebSocket client over a raw socket, for tests that must see exactly what goes on
the wire (handshake answers, close codes, binary and text frames)."""
import base64
import json
import os
import socket
import struct
import urllib.parse


class HandshakeRefused(Exception):
    def __init__(self, status, head, body):
        super().__init__("handshake answered %d: %r" % (status, body[:300]))
        self.status = status
        self.head = head
        self.body = body


def b64url(s):
    return base64.urlsafe_b64encode(s.encode()).decode().rstrip("=")


class WsClient:
    def __init__(self, url, path, headers=None, protocols=None, timeout=30):
        u = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        self.buf = b""
        key = base64.b64encode(os.urandom(16)).decode()
        hdrs = {"Host": u.netloc, "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Key": key,
                "Sec-WebSocket-Version": "13"}
        if protocols:
            hdrs["Sec-WebSocket-Protocol"] = ", ".join(protocols)
        hdrs.update(headers or {})
        req = "GET %s HTTP/1.1\r\n%s\r\n" % (path, "".join("%s: %s\r\n" % kv for kv in hdrs.items() if kv[1] is not None))
        self.sock.sendall(req.encode())
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise HandshakeRefused(0, self.buf, b"")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode(errors="replace").split("\r\n")
        status = int(lines[0].split()[1])
        self.headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        if status != 101:
            n = int(self.headers.get("content-length", "0"))
            while len(self.buf) < n:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                self.buf += chunk
            self.sock.close()
            raise HandshakeRefused(status, head, self.buf[:n])

    def _exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("the server closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, opcode, data):
        mask = os.urandom(4)
        n = len(data)
        if n < 126:
            head = bytes([0x80 | opcode, 0x80 | n])
        elif n < 65536:
            head = bytes([0x80 | opcode, 0x80 | 126]) + struct.pack(">H", n)
        else:
            head = bytes([0x80 | opcode, 0x80 | 127]) + struct.pack(">Q", n)
        self.sock.sendall(head + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(data)))

    def send_text(self, obj):
        self.send(0x1, (obj if isinstance(obj, str) else json.dumps(obj)).encode())

    def send_bytes(self, data):
        self.send(0x2, data)

    def recv(self):
        """(opcode, payload) of the next frame; pings are answered and skipped."""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            if b1 & 0x80:
                raise AssertionError("the server masked a frame")
            payload = self._exact(n)
            op = b0 & 0x0F
            if op == 0x9:
                self.send(0xA, payload)
                continue
            return op, payload

    def read_until(self, needle, limit=1 << 20):
        """Terminal output (binary frames) until `needle` shows up; returns (output, control messages)."""
        out, control = b"", []
        while needle.encode() not in out:
            op, payload = self.recv()
            if op == 0x2:
                out += payload
            elif op == 0x1:
                control.append(json.loads(payload))
            elif op == 0x8:
                raise EOFError("closed before %r appeared; output %r, control %r" % (needle, out[-500:], control))
            if len(out) > limit:
                raise AssertionError("%r not in %d bytes of output" % (needle, len(out)))
        return out, control

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
