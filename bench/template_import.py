"""What writing new templates in the build jail costs (storage/template_builder.h): template
imports against two `space dev` binaries side by side, SPACE_BIN (new) and an earlier build,
SPACE_BIN_BASE (the baseline). Rounds alternate between the two, so the host's drift weighs on
both alike. Baselines measured so far (docs/benchmarks.md): a build where `cp -a` or `tar -x`
ran with the node's capabilities (before the build jail wrote imports), and e62e9a1, where the
node read the source with CAP_DAC_READ_SEARCH and streamed it as a tar to `tar -x` in the build
jail (since then the broker opens the source and the jail reads a directory through a read-only
idmapped clone, `tar -c | tar -x` in one step).

    SPACE_BIN=build/bin/space SPACE_BIN_BASE=/tmp/base-e62/bin/space python3 bench/template_import.py [--rounds 4] [--n 5] [--files 2000]

The source, once: a directory of --files small files (half of them a user's, mode 0600, below a
0700 directory) and its gzip tarball. Each round: n imports of the directory and n of the
tarball, each under a new name, timed from the request to its reply (the tree written, digested
in the tree jail and sealed). Prints p50/p90/p99 in milliseconds and the p50 ratio
new/baseline.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
import harness  # noqa: E402
from stats import pct, timed  # noqa: E402


def make_source(tmp, files):
    src = os.path.join(tmp, "src")
    pub, priv = os.path.join(src, "pub"), os.path.join(src, "priv")
    os.makedirs(pub)
    os.makedirs(priv)
    for i in range(files // 2):
        with open(os.path.join(pub, "f%d" % i), "w") as f:
            f.write("file %d\n" % i)
        p = os.path.join(priv, "f%d" % i)
        with open(p, "w") as f:
            f.write("secret %d\n" % i)
        os.chmod(p, 0o600)
        os.chown(p, 1000, 1000)
    os.chmod(priv, 0o700)
    os.chown(priv, 1000, 1000)
    tarball = os.path.join(tmp, "src.tar.gz")
    subprocess.run(["tar", "--create", "--gzip", "--numeric-owner", "--file", tarball, "--directory", src, "."],
                   check=True)
    return src, tarball


def round_on(s, sources, n, tag, out):
    for i in range(n):
        for kind, source in sources.items():
            name = "imp-%s-%s-%d" % (tag, kind, i)

            def imp():
                st, d = s.json("POST", "/v1/templates", {"name": name, "source": source}, timeout=600)
                assert st == 201, d

            out.setdefault("import of a %s" % kind, []).append(timed(imp))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--files", type=int, default=2000)
    args = ap.parse_args()
    base_bin = os.environ.get("SPACE_BIN_BASE")
    if not base_bin:
        sys.exit("SPACE_BIN_BASE must name an earlier `space` binary to compare against")
    tmp = tempfile.mkdtemp(prefix="space-bench-import-", dir="/var/tmp")
    servers = {}
    try:
        src, tarball = make_source(tmp, args.files)
        sources = {"directory": src, "tarball": tarball}
        for name, binary in (("new", harness.SPACE_BIN), ("baseline", base_bin)):
            harness.SPACE_BIN = binary
            servers[name] = harness.Server(extra_args=["--no-egress"]).start()
        for name, s in servers.items():
            round_on(s, sources, 1, "warm", {})
        results = {name: {} for name in servers}
        for r in range(args.rounds):
            order = ["new", "baseline"] if r % 2 == 0 else ["baseline", "new"]
            for name in order:
                round_on(servers[name], sources, args.n, "r%d" % r, results[name])
    finally:
        for s in servers.values():
            s.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    print("| operation (%d files) | n | new p50 / p90 / p99 ms | baseline p50 / p90 / p99 ms | p50 new/baseline |" %
          args.files)
    print("|---|---|---|---|---|")
    for kind in results["new"]:
        f, b = results["new"][kind], results["baseline"][kind]
        print("| %s | %d | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %.2fx |" % (
            kind, len(f), pct(f, 50), pct(f, 90), pct(f, 99), pct(b, 50), pct(b, 90), pct(b, 99),
            pct(f, 50) / pct(b, 50)))


if __name__ == "__main__":
    main()
