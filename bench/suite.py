"""The benchmark suite of issue 8: every SPACE figure beside a baseline measured in the same run.

    SPACE_BIN=build/bin/space python3 bench/suite.py            # full: writes docs/benchmarks.md
    SPACE_BIN=build/bin/space python3 bench/suite.py --quick    # minutes less; writes build/bench-quick.md

Sections: create/exec/destroy latency over --n sandboxes, cold and from a warm pool, against
`bwrap --unshare-all true`, `unshare` with the same namespaces and Debian's `runc` running the
busybox template as an OCI bundle; throughput at concurrency 1/8/32/64 against bwrap at the same
concurrency; streaming (SSE stdout of `cat`, file upload/download) against local pipes and cp;
density (idle sandboxes up to --density or failure, memory per sandbox, create latency at 10/100/
1000 live); lifecycle latencies (bench/lifecycle.py); and the aggregated create profile
(timings.steps). Writes Markdown plus an SVG of the latency distributions (bench/svgplot.py).
"""
import argparse
import concurrent.futures
import datetime
import http.client
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests/integration"))
from harness import SPACE_BIN, Server, node_cgroup_name  # noqa: E402
import svgplot  # noqa: E402
from stats import pct, pss_bytes  # noqa: E402

TEMPLATE = "busybox"
WARM_POOL = 8
# Below the 16 MiB a process retains (node/process.h kMaxRetainedBytes): an SSE follower is fed
# from that buffer, so a larger stdout arrives truncated (see the notes).
STREAM_FILE = 15 << 20


def ms_since(t):
    return (time.perf_counter() - t) * 1000


class Conn:
    """One keep-alive HTTP connection, as a real client holds."""

    def __init__(self, url, key, timeout=300):
        host, port = url[len("http://"):].rsplit(":", 1)
        self.c = http.client.HTTPConnection(host, int(port), timeout=timeout)
        self.h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}

    def call(self, method, path, body=None):
        self.c.request(method, path, json.dumps(body) if body is not None else None, self.h)
        r = self.c.getresponse()
        data = r.read()
        try:
            return r.status, (json.loads(data) if data else None)
        except ValueError:
            return r.status, data

    def create(self, **extra):
        st, d = self.call("POST", "/v1/sandboxes?wait=true", {"template": TEMPLATE, "timeout_s": 7200, **extra})
        if st != 201:
            raise RuntimeError("create: %s %s" % (st, d))
        return d["sandbox"]

    def destroy(self, sid):
        st, d = self.call("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        if st != 204:
            raise RuntimeError("destroy: %s %s" % (st, d))

    def exec(self, sid, cmd):
        st, d = self.call("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": cmd})
        if st != 200 or d["exit_code"] != 0:
            raise RuntimeError("exec: %s %s" % (st, d))
        return d


def metrics(conn):
    conn.c.request("GET", "/metrics", None, conn.h)
    r = conn.c.getresponse()
    out = {}
    for line in r.read().decode().splitlines():
        m = re.match(r'(space_\w+)(?:\{template="([^"]+)"\})? (\d+)$', line)
        if m:
            out[(m.group(1), m.group(2))] = int(m.group(3))
    return out


def pool_size(conn):
    return metrics(conn).get(("space_warm_pool_size", TEMPLATE), 0)


def wait_pool(conn, at_least, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pool_size(conn) >= at_least:
            return
        time.sleep(0.01)
    raise RuntimeError("warm pool did not fill")


def start_server(data_dir, warm=0):
    args = []
    if rate_limit_flag():
        args += ["--api-rate-limit", "0"]
    if warm:
        args += ["--warm-pool", "%s=%d" % (TEMPLATE, warm)]
    return Server(data_dir=data_dir, extra_args=args).start()


_help = None


def rate_limit_flag():
    global _help
    if _help is None:
        _help = subprocess.run([SPACE_BIN, "dev", "--help"], capture_output=True, text=True).stdout
    return "--api-rate-limit" in _help


# ---------------------------------------------------------------------------------------------
# Baselines


def timed_cmd(argv, n, cwd=None):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)
        out.append(ms_since(t))
    return out


BWRAP = ["bwrap", "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
UNSHARE = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount", "--net", "--uts", "--ipc",
           "--cgroup", "true"]


def runc_bundle(template_path, workdir):
    """An OCI bundle over the busybox template (read-only), with the namespaces SPACE uses."""
    bundle = os.path.join(workdir, "runc-bundle")
    os.makedirs(bundle, exist_ok=True)
    os.chmod(workdir, 0o755)
    # A copy owned by the container's root (host uid 1<<30), as SPACE's idmapped root shows its
    # template to the sandbox; the data dir (0700) is not reachable from the user namespace.
    rootfs = os.path.join(bundle, "rootfs")
    subprocess.run(["cp", "-a", template_path, rootfs], check=True)
    subprocess.run(["chown", "-R", "%d:%d" % (1 << 30, 1 << 30), rootfs], check=True)
    subprocess.run(["runc", "spec", "--bundle", bundle], check=True, capture_output=True)
    path = os.path.join(bundle, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    cfg["process"]["terminal"] = False
    cfg["process"]["args"] = ["/bin/true"]
    cfg["root"] = {"path": "rootfs", "readonly": True}
    cfg["hostname"] = "bench"
    ns = [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount", "cgroup", "user")]
    cfg["linux"]["namespaces"] = ns
    cfg["linux"]["uidMappings"] = [{"containerID": 0, "hostID": 1 << 30, "size": 65536}]
    cfg["linux"]["gidMappings"] = [{"containerID": 0, "hostID": 1 << 30, "size": 65536}]
    # A user namespace may not mount sysfs read-write of the host's net ns; drop /sys.
    cfg["mounts"] = [m for m in cfg["mounts"] if m["destination"] != "/sys"]
    with open(path, "w") as f:
        json.dump(cfg, f)
    return bundle


_runc_seq = [0]


def runc_once(bundle):
    return runc_times(bundle, 1)[0]


def runc_times(bundle, n):
    out = []
    for _ in range(n):
        _runc_seq[0] += 1
        name = "space-bench-%d-%d" % (os.getpid(), _runc_seq[0])
        t = time.perf_counter()
        r = subprocess.run(["runc", "run", "--bundle", bundle, name], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        out.append(ms_since(t))
        if r.returncode != 0:
            subprocess.run(["runc", "delete", "-f", name], capture_output=True)
            raise RuntimeError("runc run: " + r.stderr[-500:])
    return out


# ---------------------------------------------------------------------------------------------
# Sections


def wait_pool_idle(conn, timeout=120):
    """Until the pool is full and no refill runs: nothing in the background."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = metrics(conn)
        if m.get(("space_warm_pool_size", TEMPLATE)) == WARM_POOL and m.get(("space_warm_pool_filling", TEMPLATE)) == 0:
            return
        time.sleep(0.005)
    raise RuntimeError("warm pool did not settle")


def run_quiet(argv):
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return ms_since(t)


def latency_run(s, n, warm, baselines):
    """n sequential create -> exec true -> destroy. warm="busy": each create waits (untimed) only
    for a ready pooled sandbox, so refills run beside the timed work; warm="idle": it waits until
    the pool is full and quiet, so the figure is a warm create with nothing in the background."""
    c = Conn(s.url, s.key)
    for _ in range(5):
        c.destroy(c.create()["id"])
    create, server_create, exec_rt, destroy, total, steps, hits = [], [], [], [], [], [], 0
    base = {}
    for _ in range(n):
        if warm == "busy":
            wait_pool(c, 1)
        elif warm == "idle":
            wait_pool_idle(c)
        t0 = time.perf_counter()
        sb = c.create()
        t1 = time.perf_counter()
        c.exec(sb["id"], ["true"])
        t2 = time.perf_counter()
        c.destroy(sb["id"])
        t3 = time.perf_counter()
        # Baselines interleaved with the sandboxes, so both see the same machine load.
        for name, fn in baselines.items():
            base.setdefault(name, []).append(fn())
        create.append((t1 - t0) * 1000)
        exec_rt.append((t2 - t1) * 1000)
        destroy.append((t3 - t2) * 1000)
        total.append((t3 - t0) * 1000)
        server_create.append(sb["timings"]["create_ms"])
        steps.append(sb["timings"]["steps"])
        hits += "warm_pool" in sb["timings"]["steps"]
    return {"create": create, "server_create": server_create, "exec": exec_rt, "destroy": destroy,
            "total": total, "steps": steps, "hits": hits, "base": base}


def throughput_run(s, levels, per_level, warm, bwrap_out=None):
    """Sandboxes created and destroyed per second with `c` clients, each on its own connection;
    with `bwrap_out`, bwrap at the same concurrency right after each level."""
    out = {}
    for c_n in levels:
        total = max(per_level, 2 * c_n)
        if warm:
            wait_pool(Conn(s.url, s.key), WARM_POOL)
        counter = iter(range(total))
        lock = threading.Lock()
        hits = [0]

        def worker():
            c = Conn(s.url, s.key)
            while True:
                with lock:
                    if next(counter, None) is None:
                        return
                sb = c.create()
                if "warm_pool" in sb["timings"]["steps"]:
                    with lock:
                        hits[0] += 1
                c.destroy(sb["id"])

        t = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(c_n) as ex:
            for f in [ex.submit(worker) for _ in range(c_n)]:
                f.result()
        secs = time.perf_counter() - t
        out[c_n] = (total / secs, hits[0], total)
        if bwrap_out is not None:
            bwrap_out.update(bwrap_throughput([c_n], per_level))
    return out


def bwrap_throughput(levels, per_level):
    out = {}
    for c_n in levels:
        total = max(per_level, 2 * c_n)
        t = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(c_n) as ex:
            list(ex.map(lambda _: subprocess.run(BWRAP, check=True, stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.DEVNULL), range(total)))
        out[c_n] = total / (time.perf_counter() - t)
    return out


def curl(args):
    r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{time_total} %{size_download}"] + args,
                       capture_output=True, text=True, check=True)
    code, secs, size = r.stdout.split()
    if not code.startswith("2"):
        raise RuntimeError("curl %s: HTTP %s" % (args[-1], code))
    return float(secs), int(size)


def streaming_run(s, mib, work, reps):
    c = Conn(s.url, s.key)
    sid = c.create(disk_mb=4 * mib + 512, memory_mb=max(512, 2 * mib))["id"]
    size = STREAM_FILE
    # Text (one 64-byte line repeated): stdout travels as UTF-8 JSON strings in SSE events.
    c.exec(sid, ["sh", "-c", "yes 0123456789abcdef0123456789abcdef0123456789abcdef0123456789a | head -c %d > /root/big"
                 % size])
    auth = ["-H", "Authorization: Bearer " + s.key]
    res = {}
    body = json.dumps({"cmd": ["cat", "/root/big"], "timeout_s": 600})
    secs_sse, wire = 0.0, 0
    for _ in range(reps):
        secs, got = curl(auth + ["-N", "-H", "Accept: text/event-stream", "-H", "Content-Type: application/json",
                                 "--data-binary", body, s.url + "/v1/sandboxes/%s/exec" % sid])
        if got < size:
            raise RuntimeError("SSE delivered %d bytes for a %d-byte stdout" % (got, size))
        secs_sse += secs
        wire += got
    res["sse"] = (size * reps / secs_sse, wire / reps)
    d = c.exec(sid, ["sh", "-c", "time cat /root/big | cat > /dev/null"])
    res["in_sandbox_pipe"] = d
    host_file = os.path.join(work, "big")
    with open(host_file, "wb") as f:
        line = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789a\n"
        f.write((line * (size // len(line) + 1))[:size])
    t = time.perf_counter()
    for _ in range(reps):
        subprocess.run("cat %s | cat > /dev/null" % host_file, shell=True, check=True)
    res["host_pipe"] = size * reps / (time.perf_counter() - t)
    # Files: the API caps one transfer at 100 MiB.
    fmib = min(mib, 64)
    up = os.path.join(work, "up")
    with open(up, "wb") as f:
        f.write(os.urandom(fmib << 20))
    secs_up, _ = curl(auth + ["-X", "PUT", "--data-binary", "@" + up,
                              s.url + "/v1/sandboxes/%s/files?path=/root/up" % sid])
    secs_down, got = curl(auth + [s.url + "/v1/sandboxes/%s/files?path=/root/up" % sid])
    assert got == fmib << 20, got
    t = time.perf_counter()
    shutil.copyfile(up, up + ".copy")
    os.sync()
    res["cp"] = (fmib << 20) / (time.perf_counter() - t)
    res["upload"] = (fmib << 20) / secs_up
    res["download"] = (fmib << 20) / secs_down
    res["fmib"] = fmib
    res["reps"] = reps
    c.destroy(sid)
    return res


def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":")
            out[k] = int(v.split()[0]) * 1024
    return out


def node_memory(s):
    """(bytes charged to this node's sandbox cgroups, Pss of processes in them, space dev RSS)."""
    name = node_cgroup_name(s.data_dir)
    charged = 0
    for path in ("/sys/fs/cgroup/memory/%s/memory.usage_in_bytes" % name, "/sys/fs/cgroup/%s/memory.current" % name):
        if os.path.exists(path):
            with open(path) as f:
                charged = int(f.read())
            break
    pss = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % pid) as f:
                if name not in f.read():
                    continue
        except OSError:
            continue
        pss += pss_bytes(pid)
    rss = 0
    with open("/proc/%d/status" % s.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return charged, pss, rss


def density_run(s, target, marks, probes):
    c = Conn(s.url, s.key)
    c.destroy(c.create()["id"])
    subprocess.run(["sync"])
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1")
    time.sleep(1)
    m0, n0 = meminfo(), node_memory(s)
    ids, at, failure = [], {}, None
    t_start = time.perf_counter()
    while len(ids) < target:
        try:
            ids.append(c.create()["id"])
        except Exception as e:  # noqa: BLE001 - report whatever stopped us
            failure = str(e)[:300]
            break
        if len(ids) in marks:
            lat = []
            for _ in range(probes):
                t = time.perf_counter()
                sid = c.create()["id"]
                lat.append(ms_since(t))
                c.destroy(sid)
            at[len(ids)] = lat
    fill_secs = time.perf_counter() - t_start
    time.sleep(2)
    m1, n1 = meminfo(), node_memory(s)
    live = len(ids)
    # Does the last sandbox still answer?
    c.exec(ids[-1], ["true"])
    t = time.perf_counter()
    for sid in ids:
        c.destroy(sid)
    teardown_secs = time.perf_counter() - t
    used = lambda m: m["MemTotal"] - m["MemAvailable"]  # noqa: E731
    return {
        "live": live, "failure": failure, "fill_secs": fill_secs, "teardown_secs": teardown_secs,
        "host_used": (used(m1) - used(m0)) / live,
        "slab": (m1["Slab"] - m0["Slab"]) / live,
        "cgroup": (n1[0] - n0[0]) / live,
        "pss": (n1[1] - n0[1]) / live,
        "node_rss": (n1[2] - n0[2]) / live,
        "at": at,
    }


# ---------------------------------------------------------------------------------------------
# Report


def fmt_row(name, xs, base):
    ratio = pct(xs, 50) / pct(base, 50)
    return "| %s | %d | %.2f | %.2f | %.2f | %.2fx |" % (name, len(xs), pct(xs, 50), pct(xs, 90), pct(xs, 99), ratio)


def mbps(x):
    return "%.0f MB/s" % (x / 1e6)


def machine():
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = meminfo()["MemTotal"] / 2**30
    cg = "v2" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "v1"
    kvm = "yes" if os.path.exists("/dev/kvm") else "no"
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    return ("%d cores (%s), %.1f GiB RAM, kernel %s, cgroup %s, KVM %s, load average at start %s"
            % (os.cpu_count(), cpu, mem, platform.release(), cg, kvm, " ".join(load)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small n, no density, short lifecycle")
    ap.add_argument("--n", type=int, default=None, help="sandboxes per latency run (default 500; quick 50)")
    ap.add_argument("--density", type=int, default=None, help="idle sandboxes to reach (default 1000; quick 0)")
    ap.add_argument("--data-dir", default="/var/lib/space-bench")
    ap.add_argument("--out", default=None)
    ap.add_argument("--shared", default=os.environ.get("SPACE_BENCH_SHARED", ""),
                    help="a note that the machine was shared during the run")
    args = ap.parse_args()
    quick = args.quick
    n = args.n or (50 if quick else 500)
    density = args.density if args.density is not None else (0 if quick else 1000)
    out_md = args.out or (os.path.join(ROOT, "build/bench-quick.md") if quick else os.path.join(ROOT, "docs/benchmarks.md"))
    svg_path = os.path.splitext(out_md)[0] + "-latency.svg"
    levels = [1, 8, 32, 64]
    per_level = 32 if quick else 128
    stream_mib = 64 if quick else 256
    os.makedirs(args.data_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="space-bench-", dir="/var/tmp")
    started = datetime.datetime.now(datetime.timezone.utc)
    host = machine()
    log = lambda m: print("[bench %s] %s" % (time.strftime("%H:%M:%S"), m), file=sys.stderr, flush=True)  # noqa: E731
    R = {}
    try:
        log("cold latency with interleaved baselines, n=%d" % n)
        s = start_server(args.data_dir)
        try:
            st, tl = Conn(s.url, s.key).call("GET", "/v1/templates/" + TEMPLATE)
            if st != 200:  # built on first use
                Conn(s.url, s.key).destroy(Conn(s.url, s.key).create()["id"])
                st, tl = Conn(s.url, s.key).call("GET", "/v1/templates/" + TEMPLATE)
            template_path = os.path.join(args.data_dir, "pool", "templates", tl["digest"].replace(":", "-"))
            baselines = {"bwrap": lambda: run_quiet(BWRAP), "unshare": lambda: run_quiet(UNSHARE),
                         "fork": lambda: run_quiet(["true"])}
            R["runc_error"] = None
            if shutil.which("runc"):
                try:
                    bundle = runc_bundle(template_path, work)
                    runc_once(bundle)
                    baselines["runc"] = lambda: runc_once(bundle)
                except Exception as e:  # noqa: BLE001
                    R["runc_error"] = str(e)
            R["cold"] = latency_run(s, n, warm=False, baselines=baselines)
            log("throughput, cold")
            R["tp_bwrap"] = {}
            R["tp_cold"] = throughput_run(s, levels, per_level, warm=False, bwrap_out=R["tp_bwrap"])
            log("streaming")
            R["stream"] = streaming_run(s, stream_mib, work, 3 if quick else 10)
            if density:
                log("density up to %d" % density)
                R["density"] = density_run(s, density, {10, 100, 1000} | {density}, 10 if quick else 20)
        finally:
            s.stop()
        log("warm latency, n=%d" % n)
        s = start_server(args.data_dir, warm=WARM_POOL)
        try:
            R["warm"] = latency_run(s, n, warm="idle", baselines={"bwrap": lambda: run_quiet(BWRAP)})
            log("warm latency, back to back, n=%d" % n)
            R["warm_busy"] = latency_run(s, n, warm="busy", baselines={"bwrap": lambda: run_quiet(BWRAP)})
            log("throughput, warm")
            R["tp_warm"] = throughput_run(s, levels, per_level, warm=True)
        finally:
            s.stop()
        cb = R["cold"]["base"]
        R["bwrap"], R["unshare"], R["fork"], R["runc"] = cb["bwrap"], cb["unshare"], cb["fork"], cb.get("runc", [])
        log("lifecycle")
        lc = subprocess.run([sys.executable, os.path.join(HERE, "lifecycle.py"), "--sizes",
                             "10" if quick else "10,100", "--n", "5" if quick else "10"],
                            capture_output=True, text=True, env=dict(os.environ, SPACE_BIN=SPACE_BIN))
        R["lifecycle"] = lc.stdout if lc.returncode == 0 else "lifecycle.py failed:\n\n```\n%s\n```\n" % lc.stderr[-2000:]
        log("egress")
        eg = subprocess.run([sys.executable, os.path.join(HERE, "egress.py"), "--n", "50" if quick else "200",
                             "--mib", "32" if quick else "128"],
                            capture_output=True, text=True, env=dict(os.environ, SPACE_BIN=SPACE_BIN))
        R["egress"] = eg.stdout if eg.returncode == 0 else "egress.py failed:\n\n```\n%s\n```\n" % eg.stderr[-2000:]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    finished = datetime.datetime.now(datetime.timezone.utc)
    svgplot.write_latency_svg(svg_path, [
        ("SPACE create+exec+destroy, cold", R["cold"]["total"]),
        ("SPACE create+exec+destroy, warm idle", R["warm"]["total"]),
        ("SPACE create+exec+destroy, warm back to back", R["warm_busy"]["total"]),
        ("SPACE create-to-ready, cold", R["cold"]["create"]),
        ("SPACE create-to-ready, warm", R["warm"]["create"]),
        ("SPACE exec round trip", R["cold"]["exec"]),
        ("bwrap --unshare-all true", R["bwrap"]),
        ("unshare (same namespaces) true", R["unshare"]),
    ] + ([("runc run (busybox bundle) true", R["runc"])] if R["runc"] else []),
        "Latency distributions, %d runs each (ms, log scale)" % n)
    md = report(R, args, n, density, levels, stream_mib, host, started, finished, quick, os.path.basename(svg_path))
    with open(out_md, "w") as f:
        f.write(md)
    print(md)
    log("wrote %s and %s" % (out_md, svg_path))


def report(R, args, n, density, levels, stream_mib, host, started, finished, quick, svg_name):
    cold, warm, bw = R["cold"], R["warm"], R["bwrap"]
    L = []
    L.append("# Benchmarks\n")
    L.append("Generated by `make bench` (`bench/suite.py`) on %s, %s to %s UTC (%.0f s).\n"
             % (started.strftime("%Y-%m-%d"), started.strftime("%H:%M"), finished.strftime("%H:%M"),
                (finished - started).total_seconds()))
    L.append("Machine: %s. Data dir %s; the sandbox pool is a loop-backed btrfs image when the data dir is "
             "not btrfs. Build: RelWithDebInfo. `space dev` runs with `--api-rate-limit 0` where the flag exists, "
             "and with `--warm-pool %s=%d` for the warm figures.\n" % (host, args.data_dir, TEMPLATE, WARM_POOL))
    if args.shared:
        L.append("**The machine was shared during this run**: %s. Absolute times are noisy; compare the ratios "
                 "against baselines measured in the same run.\n" % args.shared)
    L.append("Exact commands: `make bench` = `SPACE_BIN=build/bin/space python3 bench/suite.py` (full; %s), "
             "`make bench-quick` = the same with `--quick` (writes build/bench-quick.md), "
             "`make bench-lifecycle` = `bench/lifecycle.py`. Every client call is HTTP/1.1 over one keep-alive "
             "connection per client thread (Python `http.client`); streaming uses `curl`. Baselines run through "
             "Python `subprocess.run`, which adds its own fork+exec (the floor row).\n"
             % ("this file" if not quick else "docs/benchmarks.md"))
    L.append("![latency distributions](%s)\n" % svg_name)

    L.append("## 1. Create, exec, destroy (n = %d each)\n" % n)
    wb = R["warm_busy"]
    L.append("Sequential: create (`POST /v1/sandboxes?wait=true`, returns once the guest answered), one "
             "buffered `exec [\"true\"]`, `DELETE ?wait=true`. Warm: a pool of %d. *Warm, idle*: before each "
             "iteration the client waits (untimed) until the pool is full and no refill runs, i.e. a burst "
             "arriving at a rested node (%d of %d served warm). *Warm, back to back*: it waits only for one "
             "ready sandbox, so refills (forced after 200 ms without a quiet moment) run beside the timed "
             "work (%d of %d served warm). Each iteration also runs the baselines once, interleaved, so they see the same load; a row's ratio is "
             "its p50 against the bwrap p50 of the same run.\n"
             % (WARM_POOL, warm["hits"], n, wb["hits"], n))
    L.append("| what | n | p50 ms | p90 ms | p99 ms | p50 vs bwrap |")
    L.append("|---|---|---|---|---|---|")
    cb, wib, wbb = cold["base"]["bwrap"], warm["base"]["bwrap"], wb["base"]["bwrap"]
    for name, xs, base in [
            ("SPACE create-to-ready, cold (client)", cold["create"], cb),
            ("SPACE create, cold (server timings.create_ms)", cold["server_create"], cb),
            ("SPACE exec round trip `true`, cold-created sandbox", cold["exec"], cb),
            ("SPACE destroy, cold", cold["destroy"], cb),
            ("SPACE create + exec true + destroy, cold", cold["total"], cb),
            ("SPACE create-to-ready, warm pool, idle (client)", warm["create"], wib),
            ("SPACE create, warm pool, idle (server timings.create_ms)", warm["server_create"], wib),
            ("SPACE exec round trip `true`, warm, idle", warm["exec"], wib),
            ("SPACE create + exec true + destroy, warm pool, idle", warm["total"], wib),
            ("SPACE create-to-ready, warm pool, back to back (client)", wb["create"], wbb),
            ("SPACE exec round trip `true`, warm, back to back", wb["exec"], wbb),
            ("SPACE create + exec true + destroy, warm pool, back to back", wb["total"], wbb),
            ("baseline: bwrap --unshare-all true, interleaved with the warm idle run", wib, wib),
            ("baseline: bwrap --unshare-all true, interleaved with the warm back-to-back run", wbb, wbb)]:
        L.append(fmt_row(name, xs, base))
    L.append(fmt_row("baseline: bwrap --unshare-all true, interleaved with the cold run", bw, bw))
    L.append(fmt_row("baseline: unshare (user,pid,mnt,net,uts,ipc,cgroup) true", R["unshare"], bw))
    if R["runc"]:
        L.append(fmt_row("baseline: runc run, busybox template as OCI bundle, same namespaces, `true`", R["runc"], bw))
    L.append(fmt_row("floor: fork+exec true", R["fork"], bw))
    if R.get("runc_error"):
        L.append("\nrunc failed: `%s`" % R["runc_error"])
    L.append("")
    if R["runc"]:
        L.append("Against runc (p50, interleaved with the cold run): cold create+exec+destroy is %.2fx runc run.\n"
                 % (pct(cold["total"], 50) / pct(R["runc"], 50)))

    L.append("## 2. Throughput\n")
    L.append("Sandboxes created and destroyed per second (each client: create wait=true, then destroy wait=true, "
             "in a loop), against `bwrap --unshare-all true` processes per second at the same concurrency, measured right after each "
             "cold level. "
             "Warm: pool of %d, refilled in the background at lower priority.\n" % WARM_POOL)
    L.append("| clients | sandboxes | SPACE cold /s | SPACE warm /s (served warm) | bwrap /s | cold vs bwrap | warm vs bwrap |")
    L.append("|---|---|---|---|---|---|---|")
    for c_n in levels:
        tc, _, total = R["tp_cold"][c_n]
        tw, hits, _ = R["tp_warm"][c_n]
        b = R["tp_bwrap"][c_n]
        L.append("| %d | %d | %.1f | %.1f (%d) | %.1f | %.2fx | %.2fx |" % (c_n, total, tc, tw, hits, b, tc / b, tw / b))
    L.append("")

    st = R["stream"]
    L.append("## 3. Streaming\n")
    L.append("stdout: `exec [\"cat\", \"/root/big\"]` of a %.0f MiB text file with `Accept: text/event-stream`, "
             "%d times (curl, output discarded; SSE framing made each %.1f MiB on the wire). Files: `PUT`/`GET "
             "/v1/sandboxes/{id}/files` of %d MiB of random bytes. Baselines on the host in the same run, over the "
             "same file.\n" % (STREAM_FILE / 2**20, st["reps"], st["sse"][1] / 2**20, st["fmib"]))
    L.append("| what | throughput | vs baseline |")
    L.append("|---|---|---|")
    L.append("| SPACE stdout through SSE | %s | %.2fx |" % (mbps(st["sse"][0]), st["sse"][0] / st["host_pipe"]))
    L.append("| baseline: host `cat file \\| cat > /dev/null` | %s | 1.00x |" % mbps(st["host_pipe"]))
    L.append("| SPACE file upload (PUT) | %s | %.2fx |" % (mbps(st["upload"]), st["upload"] / st["cp"]))
    L.append("| SPACE file download (GET) | %s | %.2fx |" % (mbps(st["download"]), st["download"] / st["cp"]))
    L.append("| baseline: host copy of the same file + sync | %s | 1.00x |" % mbps(st["cp"]))
    L.append("")

    if "density" in R:
        d = R["density"]
        L.append("## 4. Density\n")
        L.append("Idle busybox sandboxes created one after another (cold, no pool) until %d or the first failure; "
                 "memory measured after a 2 s settle, divided by the number live. `host used` is the change in "
                 "MemTotal - MemAvailable (everything, including kernel objects, on a machine others also use); "
                 "the other columns split it: memory charged to the node's sandbox cgroups (spaced, page cache "
                 "and kernel memory charged to them), Pss of the sandbox processes, the `space dev` process's RSS "
                 "growth (a reader thread and buffers per sandbox), and slab growth.\n" % density)
        L.append("- reached **%d** live sandboxes in %.1f s%s; destroying them all took %.1f s"
                 % (d["live"], d["fill_secs"], (" (stopped: %s)" % d["failure"]) if d["failure"] else "",
                    d["teardown_secs"]))
        L.append("")
        L.append("| per sandbox | host used | cgroup charged | spaced Pss | space dev RSS | slab |")
        L.append("|---|---|---|---|---|---|")
        L.append("| KiB | %.0f | %.0f | %.0f | %.0f | %.0f |" % tuple(
            x / 1024 for x in (d["host_used"], d["cgroup"], d["pss"], d["node_rss"], d["slab"])))
        L.append("")
        L.append("Create latency with N sandboxes live (each probe creates one more and destroys it; p50 vs "
                 "the cold p50 of section 1):\n")
        L.append("| live | n | p50 ms | p90 ms | p99 ms | vs section 1 |")
        L.append("|---|---|---|---|---|---|")
        for k in sorted(d["at"]):
            lat = d["at"][k]
            L.append("| %d | %d | %.2f | %.2f | %.2f | %.2fx |" % (k, len(lat), pct(lat, 50), pct(lat, 90), pct(lat, 99),
                                                             pct(lat, 50) / pct(cold["create"], 50)))
        L.append("")

    L.append("## 5. Lifecycle (bench/lifecycle.py, in this run)\n")
    L.append(R["lifecycle"])

    L.append("## 5b. Egress gateway (bench/egress.py, in this run)\n")
    L.append("Through the gateway from a sandbox, against the same client run directly on the host to the "
             "same upstream (a network namespace reached through a veth). The upstream is Python's http.server, "
             "so direct figures are the upstream's own cost as much as the network's.\n")
    L.append(R.get("egress", "not run\n"))

    L.append("## 6. Where create time goes (timings.steps over the %d cold and %d warm creates)\n" % (n, n))
    L.append(profile(cold, "cold"))
    L.append(profile(warm, "warm"))
    L.append("## 7. Against the targets\n")
    L.append(targets(R, n))
    notes = os.path.join(HERE, "notes.md")
    if os.path.exists(notes):
        with open(notes) as f:
            L.append(f.read())
    return "\n".join(L) + "\n"


# Steps the runtime times in the parent (runtime/ns/ns_runtime.cc Launch); the child's own steps
# and `exec` happen while the parent waits in child_setup, so they are a breakdown of it.
PARENT_STEPS = {"ns." + s for s in ("validate_spec", "prepare_dirs", "mount_points", "open_guest", "channel",
                                    "cgroup_create", "build_plan", "clone", "id_maps", "cgroup_attach", "idmap_root",
                                    "send_go", "child_setup")}


def profile(run, label):
    steps = {}
    for s in run["steps"]:
        for k, v in s.items():
            steps.setdefault(k, []).append(v)
    total = pct(run["server_create"], 50)
    rows = sorted(steps.items(), key=lambda kv: -sum(kv[1]) / len(run["steps"]))
    out = ["%s: server create_ms p50 %.2f ms. Steps by mean cost per create (a step absent from a create counts 0):\n"
           % (label, total), "| step | mean ms | p50 ms | p90 ms | share of create_ms mean |", "|---|---|---|---|---|"]
    mean_total = sum(run["server_create"]) / len(run["server_create"])
    accounted = 0
    for k, v in rows:
        mean = sum(v) / len(run["steps"])
        inner = k.startswith("ns.") and k not in PARENT_STEPS
        if not inner:
            accounted += mean
        if mean < 0.05:
            continue
        name = ("&nbsp;&nbsp;%s (inside ns.child_setup)" % k) if inner else k
        out.append("| %s | %.2f | %.2f | %.2f | %.0f%% |" % (name, mean, pct(v, 50), pct(v, 90), 100 * mean / mean_total))
    out.append("| (not in a step: HTTP, store writes, operation queue) | %.2f | | | %.0f%% |"
               % (mean_total - accounted, 100 * (mean_total - accounted) / mean_total))
    return "\n".join(out) + "\n"


def targets(R, n):
    cold, warm = R["cold"], R["warm"]
    rows = ["| target | measured | met? |", "|---|---|---|"]

    def add(name, value, limit, unit, lower_is_better=True):
        ok = value <= limit if lower_is_better else value >= limit
        by = ("%.1fx over" % (value / limit)) if lower_is_better else ("%.0f%% of it" % (100 * value / limit))
        rows.append("| %s | %.2f %s | %s |" % (name, value, unit, "yes" if ok else "**no** (%s)" % by))

    add("create p50 <= 10 ms cold (client, wait=true)", pct(cold["create"], 50), 10, "ms")
    add("create p50 <= 3 ms warm (client, wait=true)", pct(warm["create"], 50), 3, "ms")
    add("create+exec+destroy <= 1.0x bwrap (cold, p50 ratio)", pct(cold["total"], 50) / pct(R["bwrap"], 50), 1.0, "x")
    add("create+exec+destroy <= 1.0x bwrap (warm idle, p50 ratio)",
        pct(warm["total"], 50) / pct(warm["base"]["bwrap"], 50), 1.0, "x")
    add("exec p50 <= 2 ms", pct(cold["exec"], 50), 2, "ms")
    add("stdout streaming >= 500 MB/s", R["stream"]["sse"][0] / 1e6, 500, "MB/s", lower_is_better=False)
    if "density" in R:
        d = R["density"]
        add(">= 1000 idle sandboxes", d["live"], 1000, "", lower_is_better=False)
        add("<= 3 MiB host memory each", d["host_used"] / 2**20, 3, "MiB")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    main()
