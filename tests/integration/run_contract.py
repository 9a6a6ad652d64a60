"""Runs ../shared/contract/api_contract.py against a real `space dev`.

The server keeps its state in SPACE_TEST_DATA_DIR so the Debian `base` template (debootstrap,
about 80 s) is built once and reused by later runs. Its build progress is printed.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Server, SPACE_BIN, delete_snapshots  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
# The contract lives beside the project (../shared); SPACE_CONTRACT overrides the path.
CONTRACT = os.environ.get("SPACE_CONTRACT", os.path.join(ROOT, "../shared/contract/api_contract.py"))


def main():
    sections = sys.argv[1:] or ["core"]
    if not os.path.exists(CONTRACT):
        print("run_contract: %s not found beside the project; the API contract was NOT checked" % CONTRACT)
        return 0
    data_dir = os.environ.get("SPACE_TEST_DATA_DIR", "/var/lib/space-test")
    os.makedirs(data_dir, exist_ok=True)
    server = Server(data_dir).start()
    try:
        # Builds `base` on first use, streaming debootstrap's progress.
        r = subprocess.run([SPACE_BIN, "template", "build", "base"], env=server.env())
        if r.returncode != 0:
            print(server.log_tail())
            return 1
        r = subprocess.run([sys.executable, CONTRACT] + sections, env=dict(server.env(), SPACE_TEMPLATE="base"))
        if r.returncode != 0:
            print(server.log_tail())
        # The data dir outlives the run (for `base`); what the contract snapshotted need not.
        print("run_contract: deleted %d snapshots left in %s" % (delete_snapshots(server), data_dir))
        return r.returncode
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
