"""A headless Chromium (Debian's `chromium`, driven by `playwright-core` from npm) loads a page
served from inside a sandbox through its private preview URL; the page's own JavaScript calls
back to the same sandbox over a WebSocket, and the test asserts on what the page rendered
(tests/browser/preview.mjs). The screenshot goes to build/screenshots/preview-port.png."""
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import is_root  # noqa: E402
import test_ports  # noqa: E402  (the module, so discovery does not run PortsTest here again)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
BROWSER_DIR = os.path.join(ROOT, "tests", "browser")


@unittest.skipUnless(is_root(), "needs root")
class BrowserPreviewTest(test_ports.PortsTest):
    @classmethod
    def setUpClass(cls):
        for tool in ("node", "npm", "chromium"):
            if not shutil.which(tool):
                raise AssertionError("%s is missing: make deps installs it" % tool)
        if not os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")):
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=BROWSER_DIR, check=True)
        super().setUpClass()

    def test_chromium_renders_the_page_and_its_websocket_echo(self):
        d = self.open_port(8765)
        shot_dir = os.path.join(ROOT, "build", "screenshots")
        os.makedirs(shot_dir, exist_ok=True)
        shot = os.path.join(shot_dir, "preview-port.png")
        if os.path.exists(shot):
            os.unlink(shot)
        r = subprocess.run(["node", "preview.mjs"], cwd=BROWSER_DIR, capture_output=True, text=True, timeout=180,
                           env=dict(os.environ, PREVIEW_URL=d["url"] + "?token=" + d["token"], SCREENSHOT=shot))
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        self.assertIn('"ok":true', r.stdout)
        self.assertGreater(os.path.getsize(shot), 1000)


# Only the browser test runs here; PortsTest's own tests run in test_ports.
for name in [n for n in dir(test_ports.PortsTest) if n.startswith("test_")]:
    setattr(BrowserPreviewTest, name, None)

if __name__ == "__main__":
    unittest.main()
