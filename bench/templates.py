"""Templates from a recipe (docs/templates.md): what a build costs cold and fully cached, and
whether a sandbox of a built template is as quick to create as one of its parent.

    SPACE_BIN=build/bin/space SPACE_TEST_DATA_DIR=/var/lib/space-test python3 bench/templates.py [--n 30] [--builds 5]

One `space dev` on SPACE_TEST_DATA_DIR (so `base` is built once). The recipe has 3 steps on
`base`: a run, an env, a workdir. "cold" builds it with no_cache (every step runs in a sandbox
and becomes a layer), "cached" builds the same recipe again (every layer is taken from the
cache), interleaved. Then creates alternate between `base` and the built template, each timed
from the request to its reply (?wait=true: the sandbox is running). Prints
p50/p90/p99 in ms and the p50 ratios: cached/cold, built-template create / base create (the
goal is within 1.1x). The sandboxes are destroyed after the last create.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
import harness  # noqa: E402
from stats import pct, timed  # noqa: E402

NAME = "bench-recipe"
RECIPE = {"name": NAME, "from": "base", "steps": [
    {"run": "echo built > /opt/built.txt && mkdir -p /srv/app"},
    {"env": {"APP_ENV": "bench"}},
    {"workdir": "/srv/app"},
]}


def build(s, no_cache):
    st, d = s.json("POST", "/v1/templates?wait=true", dict(RECIPE, no_cache=no_cache), timeout=900)
    assert st == 201, d


def create(s, template, out, made):
    def one():
        st, d = s.json("POST", "/v1/sandboxes?wait=true", {"template": template})
        assert st == 201, d
        made.append(d["sandbox"]["id"])

    out.append(timed(one))


def destroy_all(s, made):
    for sid in made:
        st, _ = s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        assert st in (200, 204), st
    del made[:]


def row(name, xs):
    print("%-34s n=%-3d p50 %8.1f  p90 %8.1f  p99 %8.1f ms" % (name, len(xs), pct(xs, 50), pct(xs, 90), pct(xs, 99)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30, help="creates of each template")
    ap.add_argument("--builds", type=int, default=5, help="cold and cached builds each")
    args = ap.parse_args()
    data_dir = os.environ.get("SPACE_TEST_DATA_DIR", "/var/lib/space-test")
    os.makedirs(data_dir, exist_ok=True)
    s = harness.Server(data_dir, extra_args=["--no-egress"]).start()
    try:
        subprocess.run([harness.SPACE_BIN, "template", "build", "base"], env=s.env(), check=True,
                       stdout=subprocess.DEVNULL)
        build(s, False)  # warm-up, untimed
        made = []
        create(s, "base", [], made)
        create(s, NAME, [], made)
        destroy_all(s, made)
        cold, cached = [], []
        for _ in range(args.builds):
            cold.append(timed(lambda: build(s, True)))
            cached.append(timed(lambda: build(s, False)))
        # Destroyed only after the last create: btrfs deletes subvolumes (and accounts their
        # qgroups) in the background, and that work landing under the next create made the
        # interleaved create/destroy figures swing between 0.65x and 1.7x from run to run.
        base, built = [], []
        for _ in range(args.n):
            create(s, "base", base, made)
            create(s, NAME, built, made)
        destroy_all(s, made)
    finally:
        s.stop()
    print("\ntemplate builds (3-step recipe on base) and creates, %s" % os.path.basename(harness.SPACE_BIN))
    row("build, cold (no_cache)", cold)
    row("build, fully cached", cached)
    row("create from base", base)
    row("create from the built template", built)
    print("ratio cached/cold build p50: %.3fx" % (pct(cached, 50) / pct(cold, 50)))
    print("ratio built-template/base create p50: %.3fx (goal <= 1.1x)" % (pct(built, 50) / pct(base, 50)))


if __name__ == "__main__":
    main()
