"""Teams and API keys (docs/keys.md) against a real `space dev`: the admin key makes a team
and keys for it; a team's key sees none of another team's objects (404); scopes limit a key
to its areas (403 naming the missing scope), on the v1 API, the terminal and the E2B
surface; expiry and revocation take effect on the very next call (401 saying which); keys
are shown once and listed without secrets; hostile key strings and bodies are refused; the
CLI does the same."""
import datetime
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import SPACE_BIN, Server, is_root  # noqa: E402
from wsclient import HandshakeRefused, WsClient, b64url  # noqa: E402


def rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@unittest.skipUnless(is_root(), "needs root")
class KeysTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server().start()
        cls.admin = cls.s.key

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()
        cls.s.cleanup()

    def as_key(self, key, method, path, body=None, **kw):
        saved, self.s.key = self.s.key, key
        try:
            return self.s.json(method, path, body, **kw)
        finally:
            self.s.key = saved

    def make_team(self, name):
        st, d = self.s.json("POST", "/v1/teams", {"name": name})
        self.assertIn(st, (201, 409), d)

    def make_key(self, team, **extra):
        st, d = self.s.json("POST", "/v1/keys", {"team": team, "name": "test", **extra})
        self.assertEqual(st, 201, d)
        self.assertTrue(d["key"].startswith("space." + d["id"] + "."), d)
        return d

    def test_teams_and_isolation(self):
        st, d = self.s.json("POST", "/v1/teams", {"name": "iso-a"})
        self.assertEqual(st, 201, d)
        self.assertEqual(self.s.json("POST", "/v1/teams", {"name": "iso-a"})[0], 409)
        self.assertEqual(self.s.json("POST", "/v1/teams", {"name": "default"})[0], 409)
        self.assertEqual(self.s.json("POST", "/v1/teams", {"name": "Bad Name"})[0], 400)
        st, d = self.s.json("GET", "/v1/teams")
        names = [t["name"] for t in d["teams"]]
        self.assertIn("default", names)
        self.assertIn("iso-a", names)
        k = self.make_key("iso-a")
        st, mine = self.as_key(k["key"], "POST", "/v1/sandboxes?wait=true", {"template": "busybox"})
        self.assertEqual(st, 201, mine)
        sid = mine["sandbox"]["id"]
        self.assertEqual(mine["sandbox"]["team"], "iso-a")
        theirs = self.s.create("busybox")
        # Neither team sees the other's sandbox; each sees its own.
        self.assertEqual(self.as_key(k["key"], "GET", "/v1/sandboxes/" + theirs)[0], 404)
        self.assertEqual(self.as_key(k["key"], "POST", "/v1/sandboxes/%s/exec" % theirs, {"cmd": ["true"]})[0], 404)
        self.assertEqual(self.s.json("GET", "/v1/sandboxes/" + sid)[0], 404)
        st, d = self.as_key(k["key"], "GET", "/v1/sandboxes")
        self.assertEqual([x["id"] for x in d["sandboxes"]], [sid])
        st, d = self.as_key(k["key"], "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["echo", "mine"]})
        self.assertEqual((st, d["stdout"]), (200, "mine\n"))
        # Its key's creation is in its audit.
        st, d = self.as_key(k["key"], "GET", "/v1/audit?kind=admin")
        self.assertTrue(any(e["action"] == "key_create" and e["detail"]["key"] == k["id"] for e in d["events"]), d)
        self.as_key(k["key"], "DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % theirs)

    def test_scopes(self):
        self.make_team("scoped")
        ro = self.make_key("scoped", scopes=["sandboxes:read"])
        self.assertEqual(ro["scopes"], ["sandboxes:read"])
        self.assertEqual(self.as_key(ro["key"], "GET", "/v1/sandboxes")[0], 200)
        st, d = self.as_key(ro["key"], "POST", "/v1/sandboxes", {"template": "busybox"})
        self.assertEqual((st, d["code"]), (403, "permission_denied"), d)
        self.assertIn("sandboxes:write", d["message"])
        self.assertEqual(self.as_key(ro["key"], "GET", "/v1/templates")[0], 403)
        self.assertEqual(self.as_key(ro["key"], "PUT", "/v1/egress-profiles/x", {"allow": []})[0], 403)
        self.assertEqual(self.as_key(ro["key"], "POST", "/v1/teams", {"name": "nope"})[0], 403)
        self.assertEqual(self.as_key(ro["key"], "GET", "/v1/keys")[0], 403)
        st, d = self.as_key(ro["key"], "GET", "/v1/keys/self")
        self.assertEqual((st, d["id"], d["team"], d["scopes"]), (200, ro["id"], "scoped", ["sandboxes:read"]))
        # The terminal runs a shell: a read key cannot open it. Neither can it use E2B.
        with self.assertRaises(HandshakeRefused) as e:
            WsClient(self.s.url, "/v1/sandboxes/sbx_x/terminal", protocols=["space.bearer." + b64url(ro["key"])])
        self.assertEqual(e.exception.status, 403)
        st, _, _ = self.s.call("GET", "/sandboxes", key=False, headers={"X-API-Key": ro["key"]})
        self.assertEqual(st, 403)
        tpl = self.make_key("scoped", scopes=["templates:read"])
        self.assertEqual(self.as_key(tpl["key"], "GET", "/v1/templates")[0], 200)
        self.assertEqual(self.as_key(tpl["key"], "GET", "/v1/sandboxes")[0], 403)
        # The admin key keeps everything.
        st, d = self.s.json("GET", "/v1/keys/self")
        self.assertEqual((st, d["team"], d["scopes"]), (200, "default", ["admin"]))

    def test_revoke_and_expiry_take_effect_on_the_next_call(self):
        self.make_team("ephemeral")
        k = self.make_key("ephemeral")
        self.assertEqual(self.as_key(k["key"], "GET", "/v1/sandboxes")[0], 200)
        self.assertEqual(self.s.call("DELETE", "/v1/keys/" + k["id"])[0], 204)
        st, d = self.as_key(k["key"], "GET", "/v1/sandboxes")
        self.assertEqual((st, d["code"]), (401, "unauthenticated"))
        self.assertIn("revoked", d["message"])
        st, d = self.s.json("GET", "/v1/keys?team=ephemeral")
        listed = {x["id"]: x for x in d["keys"]}
        self.assertIsNotNone(listed[k["id"]]["revoked_at"])
        self.assertNotIn("key", listed[k["id"]])  # the secret is shown once, at creation
        self.assertNotIn(k["key"].rsplit(".", 1)[1], json.dumps(d))
        self.assertEqual(self.s.call("DELETE", "/v1/keys/key_doesnotexist000000000000")[0], 404)

        soon = self.make_key("ephemeral", expires_at=rfc3339(time.time() + 3))
        self.assertEqual(self.as_key(soon["key"], "GET", "/v1/sandboxes")[0], 200)
        time.sleep(max(0, datetime.datetime.fromisoformat(soon["expires_at"].replace("Z", "+00:00")).timestamp()
                       - time.time() + 0.2))
        st, d = self.as_key(soon["key"], "GET", "/v1/sandboxes")
        self.assertEqual(st, 401, d)
        self.assertIn("expired", d["message"])

    def test_quotas(self):
        st, d = self.s.json("POST", "/v1/teams", {"name": "quota-team", "quotas": {"sandboxes": 1, "cpus": 1}})
        self.assertIn(st, (201, 409), d)
        st, d = self.s.json("PUT", "/v1/teams/quota-team", {"quotas": {"sandboxes": 1, "cpus": 1}})
        self.assertEqual((st, d["quotas"]), (200, {"sandboxes": 1, "cpus": 1}), d)
        self.assertEqual(self.s.json("PUT", "/v1/teams/quota-team", {"quotas": {"gpus": 1}})[0], 400)
        k = self.make_key("quota-team")
        st, d = self.as_key(k["key"], "POST", "/v1/sandboxes?wait=true", {"template": "busybox"})
        self.assertEqual(st, 201, d)
        sid = d["sandbox"]["id"]
        st, d = self.as_key(k["key"], "POST", "/v1/sandboxes?wait=true", {"template": "busybox"})
        self.assertEqual((st, d["code"]), (429, "resource_exhausted"), d)
        self.assertIn("quota 'sandboxes'", d["message"])
        st, d = self.s.json("GET", "/v1/teams/quota-team")
        self.assertEqual((st, d["usage"]["sandboxes"]), (200, 1), d)
        self.as_key(k["key"], "DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        st, d = self.as_key(k["key"], "POST", "/v1/sandboxes?wait=true", {"template": "busybox", "cpus": 2})
        self.assertEqual(st, 429, d)
        self.assertIn("quota 'cpus'", d["message"])

    def test_hostile_keys_and_bodies(self):
        self.make_team("hostile")
        k = self.make_key("hostile")
        kid, secret = k["key"].split(".")[1], k["key"].split(".")[2]
        for bad in ["space." + kid + "." + secret[:-1] + ("0" if secret[-1] != "0" else "1"),  # one digit off
                    "space." + kid + ".", "space." + kid, "space.", "space..x", "space.key_x.y",
                    "space." + kid + "." + secret + "x", "space.../../etc." + secret, "space." + "k" * 5000]:
            st, d = self.as_key(bad, "GET", "/v1/sandboxes")
            self.assertEqual(st, 401, (bad[:60], d))
        for body, status in [({"team": "hostile", "name": "n", "scopes": ["root"]}, 400),
                             ({"team": "hostile", "name": "n", "scopes": ["admin"]}, 400),
                             ({"team": "hostile", "name": "n", "scopes": []}, 400),
                             ({"team": "nosuchteam", "name": "n"}, 404),
                             ({"team": "hostile", "name": "n", "expires_at": "2001-01-01T00:00:00Z"}, 400),
                             ({"team": "hostile", "name": "n", "expires_at": "tomorrow"}, 400),
                             ({"team": "hostile", "name": "has space"}, 400),
                             ({"team": "hostile"}, 400),
                             ({"team": "hostile", "name": "n", "extra": 1}, 400)]:
            st, d = self.s.json("POST", "/v1/keys", body)
            self.assertEqual(st, status, (body, d))
            self.assertIn("message", d)

    def test_cli(self):
        env = self.s.env()
        r = subprocess.run([SPACE_BIN, "team", "create", "cli-team"], env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([SPACE_BIN, "key", "create", "--team", "cli-team", "--name", "bot", "--scope", "sandboxes:read"],
                           env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        key = r.stdout.strip()
        self.assertTrue(key.startswith("space.key_"), r.stdout)
        r = subprocess.run([SPACE_BIN, "key", "self"], env=dict(env, SPACE_API_KEY=key), capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("cli-team", r.stdout)
        self.assertIn("sandboxes:read", r.stdout)
        r = subprocess.run([SPACE_BIN, "team", "create", "x"], env=dict(env, SPACE_API_KEY=key), capture_output=True,
                           text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("admin", r.stderr)
        kid = key.split(".")[1]
        r = subprocess.run([SPACE_BIN, "key", "rm", kid], env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([SPACE_BIN, "ls"], env=dict(env, SPACE_API_KEY=key), capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("revoked", r.stderr)


if __name__ == "__main__":
    unittest.main()
