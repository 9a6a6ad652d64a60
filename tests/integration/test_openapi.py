"""docs/openapi.yaml against API.md and against a real `space dev`.

Standard library only (no PyYAML): `load_yaml` reads the restricted YAML subset that
docs/openapi.yaml keeps to (block mappings and sequences, scalars, quoted strings, ">-" / "|"
block scalars, the empty flow collections [] and {}).

- The document checks run anywhere: every API.md route is documented, every field and
  parameter has a description, every $ref resolves.
- The server checks need root (like every integration test): each documented route is routed
  (no generic 'no route for' 404), routes marked x-space-unrouted still are not (so the doc is
  updated when they land), routes marked x-space-not-implemented answer 503 unavailable, and
  every error answer is JSON {code, message}.

Run the parser alone: python3 tests/integration/test_openapi.py --paths
"""
import json
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
OPENAPI = os.path.join(ROOT, "docs", "openapi.yaml")
API_MD_CANDIDATES = [os.environ.get("SPACE_API_MD", ""), "/work/shared/API.md", os.path.join(ROOT, "API.md"),
                     os.path.join(ROOT, "docs", "API.md")]
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")

# The routes API.md lists (as of the v1 contract), used when API.md is not available and as a
# floor for what the extraction from API.md must find.
API_MD_ROUTES = {
    ("POST", "/v1/sandboxes"), ("GET", "/v1/sandboxes"), ("GET", "/v1/sandboxes/{id}"),
    ("DELETE", "/v1/sandboxes/{id}"), ("POST", "/v1/sandboxes/{id}/timeout"),
    ("POST", "/v1/sandboxes/{id}/pause"), ("POST", "/v1/sandboxes/{id}/resume"),
    ("POST", "/v1/sandboxes/{id}/suspend"), ("POST", "/v1/sandboxes/{id}/exec"),
    ("POST", "/v1/sandboxes/{id}/processes"), ("GET", "/v1/sandboxes/{id}/processes"),
    ("GET", "/v1/sandboxes/{id}/processes/{pid}"), ("GET", "/v1/sandboxes/{id}/processes/{pid}/output"),
    ("POST", "/v1/sandboxes/{id}/processes/{pid}/stdin"), ("POST", "/v1/sandboxes/{id}/processes/{pid}/signal"),
    ("GET", "/v1/sandboxes/{id}/files"), ("PUT", "/v1/sandboxes/{id}/files"), ("DELETE", "/v1/sandboxes/{id}/files"),
    ("GET", "/v1/sandboxes/{id}/files/list"), ("GET", "/v1/sandboxes/{id}/files/stat"),
    ("POST", "/v1/sandboxes/{id}/files/mkdir"), ("POST", "/v1/sandboxes/{id}/files/move"),
    ("POST", "/v1/sandboxes/{id}/snapshots"), ("GET", "/v1/sandboxes/{id}/snapshots"),
    ("GET", "/v1/snapshots/{id}"), ("DELETE", "/v1/snapshots/{id}"),
    ("POST", "/v1/sandboxes/{id}/fork"), ("POST", "/v1/sandboxes/{id}/rollback"),
    ("GET", "/v1/operations/{id}"), ("GET", "/v1/sandboxes/{id}/commands"), ("GET", "/v1/audit"),
    ("PUT", "/v1/egress-profiles/{name}"), ("GET", "/v1/egress-profiles/{name}"),
    ("GET", "/v1/egress-profiles"), ("DELETE", "/v1/egress-profiles/{name}"),
    ("PUT", "/v1/credentials/{name}"),
    ("GET", "/v1/templates"), ("GET", "/v1/templates/{name}"), ("POST", "/v1/templates"),
    ("GET", "/healthz"), ("GET", "/metrics"),
}


# ---------------------------------------------------------------------------------------------
# Restricted YAML subset
# ---------------------------------------------------------------------------------------------

class YamlError(ValueError):
    pass


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def _strip_comment(text):
    """Removes a ' #' comment outside quotes."""
    quote = None
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1] == " "):
            return text[:i].rstrip()
    return text.rstrip()


def _scalar(text, lineno):
    t = text.strip()
    if t == "":
        return None
    if t[0] == '"':
        if not t.endswith('"') or len(t) < 2:
            raise YamlError("line %d: unterminated double-quoted string" % lineno)
        try:
            return json.loads(t)
        except ValueError as e:
            raise YamlError("line %d: bad double-quoted string: %s" % (lineno, e))
    if t[0] == "'":
        if not t.endswith("'") or len(t) < 2:
            raise YamlError("line %d: unterminated single-quoted string" % lineno)
        return t[1:-1].replace("''", "'")
    if t == "[]":
        return []
    if t == "{}":
        return {}
    if t[0] in "[{&*!|>%@`":
        raise YamlError("line %d: unsupported YAML construct %r" % (lineno, t[:20]))
    if t in ("true", "True"):
        return True
    if t in ("false", "False"):
        return False
    if t in ("null", "~"):
        return None
    if re.fullmatch(r"-?\d+", t):
        return int(t)
    if re.fullmatch(r"-?\d+\.\d*([eE][-+]?\d+)?", t):
        return float(t)
    if ": " in t or " #" in t:
        raise YamlError("line %d: plain scalar needs quotes: %r" % (lineno, t[:40]))
    return t


def _split_key(text, lineno):
    """'key: rest' -> (key, rest). Keys may be double- or single-quoted."""
    if text[0] in "\"'":
        q = text[0]
        end = text.find(q, 1)
        if end < 0 or not text[end + 1:].startswith(":"):
            raise YamlError("line %d: bad quoted key" % lineno)
        return text[1:end], text[end + 2:]
    m = re.match(r"([^:]+?):(?: (.*)|$)", text)
    if not m:
        raise YamlError("line %d: expected 'key: value', got %r" % (lineno, text[:40]))
    return m.group(1), m.group(2) or ""


def load_yaml(text):
    # (lineno, indent, content) for meaningful lines; raw lines kept for block scalars.
    raw = text.split("\n")
    lines = []
    for n, line in enumerate(raw, 1):
        if "\t" in line[:_indent(line) + 1] and line.strip():
            raise YamlError("line %d: tab in indentation" % n)
        if not line.strip() or line.strip().startswith("#"):
            continue
        lines.append((n, _indent(line), line.strip()))

    pos = 0

    def block_scalar(style, parent_indent, start_lineno):
        # Collect raw lines after start_lineno that are blank or indented deeper than the parent.
        nonlocal pos
        body = []
        n = start_lineno  # 1-based lineno of the header; raw[n] is the next line
        while n < len(raw):
            line = raw[n]
            if line.strip() and _indent(line) <= parent_indent:
                break
            body.append(line)
            n += 1
        while body and not body[-1].strip():
            body.pop()
        while pos < len(lines) and lines[pos][0] <= n:
            pos += 1
        if not body:
            return ""
        ind = min(_indent(l) for l in body if l.strip())
        body = [l[ind:] if l.strip() else "" for l in body]
        if style.startswith(">"):
            out, para = [], []
            for l in body:
                if l == "":
                    out.append(" ".join(para))
                    para = []
                else:
                    para.append(l)
            out.append(" ".join(para))
            s = "\n".join(out)
        else:
            s = "\n".join(body)
        return s if style.endswith("-") else s + "\n"

    def value_after_key(rest, indent, lineno):
        nonlocal pos
        rest = _strip_comment(rest)
        if rest in ("|", "|-", ">", ">-"):
            return block_scalar(rest, indent, lineno)
        if rest != "":
            return _scalar(rest, lineno)
        if pos < len(lines) and lines[pos][1] > indent:
            return parse_node(lines[pos][1])
        if pos < len(lines) and lines[pos][1] == indent and lines[pos][2].startswith("- "):
            return parse_node(indent)
        return None

    def parse_node(indent):
        nonlocal pos
        if lines[pos][2].startswith("- ") or lines[pos][2] == "-":
            return parse_seq(indent)
        return parse_map(indent)

    def parse_map(indent):
        nonlocal pos
        out = {}
        while pos < len(lines):
            lineno, ind, content = lines[pos]
            if ind < indent:
                break
            if ind > indent:
                raise YamlError("line %d: unexpected indentation" % lineno)
            if content.startswith("- "):
                break
            key, rest = _split_key(content, lineno)
            if key in out:
                raise YamlError("line %d: duplicate key %r" % (lineno, key))
            pos += 1
            out[key] = value_after_key(rest, indent, lineno)
        return out

    def parse_seq(indent):
        nonlocal pos
        out = []
        while pos < len(lines):
            lineno, ind, content = lines[pos]
            if ind != indent or not (content.startswith("- ") or content == "-"):
                if ind > indent:
                    raise YamlError("line %d: unexpected indentation" % lineno)
                break
            item = content[2:].strip() if content != "-" else ""
            if item == "":
                pos += 1
                out.append(parse_node(lines[pos][1]) if pos < len(lines) and lines[pos][1] > indent else None)
            elif re.match(r"(\"[^\"]*\"|'[^']*'|[^\"'\s:][^:]*?):( |$)", item):
                # "- key: value": a mapping whose keys sit at indent + 2.
                lines[pos] = (lineno, indent + 2, item)
                out.append(parse_map(indent + 2))
            else:
                pos += 1
                out.append(_scalar(_strip_comment(item), lineno))
        return out

    if not lines:
        return None
    doc = parse_node(lines[0][1])
    if pos != len(lines):
        raise YamlError("line %d: could not parse from here" % lines[pos][0])
    return doc


def load_openapi(path=OPENAPI):
    with open(path, encoding="utf-8") as f:
        return load_yaml(f.read())


def documented_operations(doc):
    """[(METHOD, path, operation dict)] in file order."""
    out = []
    for path, item in (doc.get("paths") or {}).items():
        for m, op in (item or {}).items():
            if m in METHODS:
                out.append((m.upper(), path, op or {}))
    return out


# ---------------------------------------------------------------------------------------------
# API.md route extraction
# ---------------------------------------------------------------------------------------------

def _norm(path):
    return re.sub(r"\{[^}]*\}", "{}", path.rstrip("/") or "/")


def api_md_routes(text):
    """Method + path pairs from API.md's backticked route mentions. '…/x' means
    /v1/sandboxes/{id}/x, 'a|b|c' in the last segment expands, '[?...]' / '?...' are dropped,
    a bare `GET` / `DELETE` span refers to the last path with a {parameter} mentioned before it
    (API.md writes `PUT /v1/x/{name}` ..., `GET`, `GET /v1/x`, `DELETE`)."""
    routes = set()
    last_path = None
    for span in re.findall(r"`([^`]*)`", text):
        span = span.strip()
        bare = re.fullmatch(r"(GET|POST|PUT|DELETE|PATCH)", span)
        if bare and last_path:
            routes.add((bare.group(1), last_path))
            continue
        for m in re.finditer(r"\b(GET|POST|PUT|DELETE|PATCH)\s+((?:/|…/|\.\.\./)[^\s`]*)", span):
            method, path = m.group(1), m.group(2)
            path = re.sub(r"\[.*$", "", path)
            path = path.split("?", 1)[0]
            path = re.sub(r"^(…|\.\.\.)/", "/v1/sandboxes/{id}/", path)
            head, _, tail = path.rpartition("/")
            for seg in tail.split("|"):
                p = head + "/" + seg
                routes.add((method, p))
            if "{" in path:
                last_path = head + "/" + tail.split("|")[0]
    return routes


def read_api_md():
    for p in API_MD_CANDIDATES:
        if p and os.path.isfile(p):
            with open(p, encoding="utf-8") as f:
                return f.read()
    return None


# ---------------------------------------------------------------------------------------------
# Document checks (no server)
# ---------------------------------------------------------------------------------------------

# Routes API.md pins for capabilities that are open issues, not yet built, so not yet in
# docs/openapi.yaml. The list only shrinks: a route that gets documented must leave it (the test
# below fails while it is on both).
PENDING_ROUTES = {
    # issue 25: ports and preview URLs
    ("POST", "/v1/sandboxes/{id}/ports"), ("GET", "/v1/sandboxes/{id}/ports"),
    ("DELETE", "/v1/sandboxes/{id}/ports/{port}"),
}


class OpenApiDocumentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.doc = load_openapi()
        cls.ops = documented_operations(cls.doc)
        cls.documented = {(m, _norm(p)) for m, p, _ in cls.ops}

    def test_header(self):
        self.assertEqual(self.doc.get("openapi"), "3.0.3")
        self.assertIn("bearer", self.doc["components"]["securitySchemes"])
        self.assertGreaterEqual(len(self.ops), 30)

    def test_api_md_routes_documented(self):
        text = read_api_md()
        wanted = set(API_MD_ROUTES)
        if text is not None:
            extracted = api_md_routes(text)
            # The extraction must at least find what API.md listed when this test was written.
            missing_from_extraction = {r for r in API_MD_ROUTES if (r[0], _norm(r[1])) not in
                                       {(m, _norm(p)) for m, p in extracted}}
            self.assertFalse(missing_from_extraction, "API.md extraction lost routes: %s" % sorted(missing_from_extraction))
            wanted |= extracted
        pending = {(m, _norm(p)) for m, p in PENDING_ROUTES}
        missing = sorted((m, p) for m, p in wanted if (m, _norm(p)) not in self.documented | pending)
        self.assertFalse(missing, "routes in API.md but not in docs/openapi.yaml: %s" % missing)
        built = sorted((m, p) for m, p in PENDING_ROUTES if (m, _norm(p)) in self.documented)
        self.assertFalse(built, "documented now, so no longer pending: take them off PENDING_ROUTES: %s" % built)

    def test_every_field_and_parameter_described(self):
        problems = []

        def walk(node, where, is_schema=False):
            if isinstance(node, dict):
                if "$ref" in node:
                    return
                if is_schema and not node.get("description"):
                    problems.append(where)
                for k, v in node.items():
                    if k == "properties" and isinstance(v, dict):
                        for name, sub in v.items():
                            walk(sub, "%s.%s" % (where, name), True)
                    elif k in ("items", "additionalProperties") and isinstance(v, dict):
                        walk(v, "%s[%s]" % (where, k), True)
                    elif k in ("oneOf", "anyOf", "allOf") and isinstance(v, list):
                        for i, sub in enumerate(v):
                            walk(sub, "%s.%s[%d]" % (where, k, i), True)
                    elif k == "schema" and isinstance(v, dict):
                        walk(v, where + ".schema", True)
                    elif k == "parameters" and isinstance(v, list):
                        for p in v:
                            if isinstance(p, dict) and "$ref" not in p and not p.get("description"):
                                problems.append("%s parameter %s" % (where, p.get("name")))
                            walk(p, "%s(%s)" % (where, p.get("name") if isinstance(p, dict) else p))
                    elif isinstance(v, (dict, list)):
                        walk(v, "%s/%s" % (where, k))
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    walk(v, "%s[%d]" % (where, i))

        walk(self.doc.get("paths"), "paths")
        for name, p in self.doc["components"].get("parameters", {}).items():
            if not p.get("description"):
                problems.append("components.parameters." + name)
            walk(p, "components.parameters." + name)
        for name, s in self.doc["components"]["schemas"].items():
            walk(s, "components.schemas." + name, True)
        self.assertFalse(problems, "missing descriptions: %s" % problems)

    def test_refs_resolve(self):
        refs = []

        def walk(node):
            if isinstance(node, dict):
                for k, v in node.items():
                    if k == "$ref":
                        refs.append(v)
                    else:
                        walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(self.doc)
        for ref in refs:
            self.assertTrue(ref.startswith("#/"), ref)
            node = self.doc
            for part in ref[2:].split("/"):
                self.assertIn(part, node, "unresolved $ref " + ref)
                node = node[part]

    def test_error_codes(self):
        codes = self.doc["components"]["schemas"]["ErrorCode"]["enum"]
        self.assertEqual(set(codes), {"invalid_argument", "unauthenticated", "permission_denied", "not_found",
                                      "conflict", "payload_too_large", "resource_exhausted", "unavailable",
                                      "internal"})

    def test_extraction_notices_a_missing_route(self):
        # The check above can fail: drop one route and it must be reported.
        ops = {k for k in self.documented if k != ("POST", "/v1/sandboxes/{}/exec")}
        self.assertNotIn(("POST", "/v1/sandboxes/{}/exec"), ops)
        self.assertIn(("POST", "/v1/sandboxes/{}/exec"), {(m, _norm(p)) for m, p in API_MD_ROUTES})


# ---------------------------------------------------------------------------------------------
# Server checks (root)
# ---------------------------------------------------------------------------------------------

sys.path.insert(0, HERE)
from harness import Server, is_root  # noqa: E402

PLACEHOLDERS = {"id": "sbx_doesnotexist", "pid": "proc_doesnotexist", "name": "nope"}
PER_PATH_ID = {"/v1/operations/{id}": "op_doesnotexist", "/v1/snapshots/{id}": "snap_doesnotexist",
               "/v1/snapshots/{id}/diff": "snap_doesnotexist"}

# Bodies that are valid enough to reach the handler but can never create or build anything:
# creation and template builds get a body with an unknown field (refused with 400).
SAFE_BODIES = {
    ("POST", "/v1/sandboxes"): {"nope": True},
    ("POST", "/v1/templates"): {"nope": True},
    ("POST", "/v1/teams"): {"nope": True},
    ("POST", "/v1/keys"): {"nope": True},
    ("POST", "/v1/sandboxes/{id}/exec"): {"cmd": ["true"], "timeout_s": 5},
    ("POST", "/v1/sandboxes/{id}/processes"): {"cmd": ["true"], "timeout_s": 5},
    ("POST", "/v1/sandboxes/{id}/timeout"): {"timeout_s": 60},
    ("POST", "/v1/sandboxes/{id}/processes/{pid}/signal"): {"signal": "SIGTERM"},
    ("POST", "/v1/sandboxes/{id}/files/mkdir"): {"path": "/tmp/x"},
    ("POST", "/v1/sandboxes/{id}/files/move"): {"from": "/tmp/x", "to": "/tmp/y"},
}


def concrete(path):
    def sub(m):
        name = m.group(1)
        if name == "id" and path in PER_PATH_ID:
            return PER_PATH_ID[path]
        return PLACEHOLDERS.get(name, "nope")
    url = re.sub(r"\{([^}]*)\}", sub, path)
    if "/files" in path:
        url += "?path=/tmp/x"
    return url


@unittest.skipUnless(is_root(), "needs root (namespaces, cgroups, loop devices)")
class OpenApiServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.doc = load_openapi()
        cls.s = Server().start()

    @classmethod
    def tearDownClass(cls):
        cls.s.cleanup()

    def answer(self, method, url, body=None, raw=None, **kw):
        st, headers, b = self.s.call(method, url, body=body, raw=raw, timeout=60, **kw)
        data = None
        if st >= 400:
            ctype = headers.get("Content-Type", "")
            self.assertIn("application/json", ctype, "%s %s -> %d with Content-Type %r" % (method, url, st, ctype))
            data = json.loads(b)
            self.assertIsInstance(data, dict, "%s %s -> %d: %r" % (method, url, st, b[:200]))
            self.assertTrue(isinstance(data.get("code"), str) and data["code"],
                            "%s %s -> %d without code: %r" % (method, url, st, data))
            self.assertTrue(isinstance(data.get("message"), str) and data["message"],
                            "%s %s -> %d without message: %r" % (method, url, st, data))
        return st, data

    @staticmethod
    def is_no_route(st, data):
        return st == 404 and isinstance(data, dict) and str(data.get("message", "")).startswith("no route for")

    def test_documented_routes_are_routed(self):
        for method, path, op in documented_operations(self.doc):
            url = concrete(path)
            body = SAFE_BODIES.get((method, path))
            raw = None
            if body is None and method in ("POST", "PUT"):
                raw = b""
            with self.subTest(route="%s %s" % (method, path)):
                st, data = self.answer(method, url, body=body, raw=raw)
                if op.get("x-space-unrouted"):
                    self.assertTrue(self.is_no_route(st, data),
                                    "%s %s is documented as unrouted but answered %d %r: update docs/openapi.yaml"
                                    % (method, path, st, data))
                    continue
                self.assertFalse(self.is_no_route(st, data), "%s %s -> %r" % (method, url, data))
                if op.get("x-space-not-implemented"):
                    self.assertEqual(st, 503, "%s %s -> %d %r" % (method, url, st, data))
                    self.assertEqual(data["code"], "unavailable")
                documented = {str(k) for k in (op.get("responses") or {})}
                self.assertIn(str(st), documented, "%s %s answered %d, documented: %s" % (method, url, st, sorted(documented)))

    def test_undocumented_route_is_not_routed(self):
        for method, url in (("GET", "/v1/sandboxes/sbx_x/nonexistent"), ("PATCH", "/v1/sandboxes"),
                            ("GET", "/v1/nonexistent"), ("POST", "/v1/sandboxes/sbx_x/files")):
            with self.subTest(route="%s %s" % (method, url)):
                st, data = self.answer(method, url, raw=b"" if method in ("POST", "PATCH") else None)
                self.assertTrue(self.is_no_route(st, data), "%s %s -> %d %r" % (method, url, st, data))

    def test_unauthenticated_is_json(self):
        st, data = self.answer("GET", "/v1/sandboxes", key=False)
        self.assertEqual(st, 401)
        self.assertEqual(data["code"], "unauthenticated")
        st, _ = self.answer("GET", "/healthz", key=False)
        self.assertEqual(st, 200)


if __name__ == "__main__":
    if "--paths" in sys.argv:
        for m, p, op in documented_operations(load_openapi()):
            flag = " (unrouted)" if op.get("x-space-unrouted") else " (503)" if op.get("x-space-not-implemented") else ""
            print("%-7s %s%s" % (m, p, flag))
        sys.exit(0)
    unittest.main()
