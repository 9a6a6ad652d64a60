"""A tiny authoritative DNS server for the egress tests: answers A queries from a fixed zone
(NAME=IP arguments), NXDOMAIN for anything else, on 127.0.0.1:<port> (DNS_BIND=IP:PORT: there).
Prints the port."""
import os
import socket
import struct
import sys

zone = dict(a.split("=", 1) for a in sys.argv[1:])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
bind = os.environ.get("DNS_BIND", "127.0.0.1:0").rsplit(":", 1)
s.bind((bind[0], int(bind[1])))
print(s.getsockname()[1], flush=True)
while True:
    data, peer = s.recvfrom(4096)
    if len(data) < 12:
        continue
    qid, flags, qd = struct.unpack(">HHH", data[:6])
    off, labels = 12, []
    while off < len(data) and data[off]:
        n = data[off]
        labels.append(data[off + 1:off + 1 + n].decode().lower())
        off += 1 + n
    qtype, = struct.unpack(">H", data[off + 1:off + 3])
    question = data[12:off + 5]
    name = ".".join(labels)
    ip = zone.get(name)
    if ip is None:
        s.sendto(struct.pack(">HHHHHH", qid, 0x8183, 1, 0, 0, 0) + question, peer)
        continue
    answers = b""
    if qtype == 1:
        answers = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(ip)
    s.sendto(struct.pack(">HHHHHH", qid, 0x8180, 1, 1 if answers else 0, 0, 0) + question + answers, peer)
