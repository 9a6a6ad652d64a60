# SPACE's code-interpreter execution service: stateful Python contexts for E2B's runCode.
#
# The node starts it inside the sandbox (as `user`) with `python3 -u -c <this file>` and
# speaks JSON lines over its stdin/stdout; nothing listens on a port, so clients reach it
# only through SPACE's API. One request at a time:
#   in:  {"id": n, "op": "execute", "code": "...", "context_id"?: "...", "language"?: "...", "env_vars"?: {...}}
#        {"id": n, "op": "create_context", "language"?: "...", "cwd"?: "..."}
#        {"id": n, "op": "list_contexts"} | {"id": n, "op": "delete_context" | "restart_context", "context_id": "..."}
#   out: {"id": n, "msg": {...}}   an output message of @e2b/code-interpreter's wire format
#        {"id": n, "done": true, "result"?: ..., "error"?: {"status": 404, "message": "..."}}   last
# Anything the executed code writes straight to fd 1 (subprocesses) goes to stderr, so it
# cannot corrupt the protocol.
import ast
import datetime
import json
import os
import sys
import traceback
import uuid

_proto = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.__stdout__ = open(1, "w", buffering=1, closefd=False)
_default_cwd = os.path.expanduser("~")


def _send(obj):
    _proto.write(json.dumps(obj, default=str) + "\n")
    _proto.flush()


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class Context:
    def __init__(self, language="python", cwd=None, cid=None):
        self.id = cid or uuid.uuid4().hex
        self.language = language
        self.cwd = cwd or _default_cwd
        self.reset()

    def reset(self):
        self.globals = {"__name__": "__main__", "__builtins__": __builtins__}
        self.count = 0

    def info(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}


_contexts = {"default": Context(cid="default")}


class _Stream:
    """sys.stdout / sys.stderr while code runs: whole lines become messages (as Jupyter
    groups them, so print("a") is one "a\n"); flush() sends a partial line."""

    def __init__(self, rid, kind):
        self.rid, self.kind, self.buf = rid, kind, ""

    def write(self, text):
        self.buf += text
        cut = self.buf.rfind("\n") + 1
        if cut:
            self._emit(self.buf[:cut])
            self.buf = self.buf[cut:]
        return len(text)

    def flush(self):
        if self.buf:
            self._emit(self.buf)
            self.buf = ""

    def _emit(self, text):
        _send({"id": self.rid, "msg": {"type": self.kind, "text": text, "timestamp": _now()}})

    def isatty(self):
        return False


def _result(value):
    out = {"type": "result", "is_main_result": True, "text": repr(value)}
    for attr, key in (("_repr_html_", "html"), ("_repr_markdown_", "markdown"), ("_repr_json_", "json")):
        fn = getattr(value, attr, None)
        if callable(fn):
            try:
                rendered = fn()
                if rendered is not None:
                    out[key] = rendered
            except Exception:
                pass
    return out


def _execute(rid, req):
    language = req.get("language") or "python"
    if language != "python":
        return {"error": {"status": 400, "message": "language '%s' is not supported by SPACE (python only)" % language}}
    ctx = _contexts.get(req.get("context_id") or "default")
    if ctx is None:
        return {"error": {"status": 404, "message": "Context %s not found" % req.get("context_id")}}
    saved_env = dict(os.environ)
    os.environ.update({str(k): str(v) for k, v in (req.get("env_vars") or {}).items()})
    saved_out, saved_err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Stream(rid, "stdout"), _Stream(rid, "stderr")
    ctx.count += 1
    try:
        os.chdir(ctx.cwd)
        tree = ast.parse(req.get("code", ""), "<cell>", "exec")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "<cell>", "exec"), ctx.globals)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), ctx.globals)
            if value is not None:
                _send({"id": rid, "msg": _result(value)})
    except BaseException as e:  # noqa: B036 - user code may raise anything, even SystemExit
        # Drop this file's own frame: the traceback starts in the cell, as in Jupyter.
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next))
        _send({"id": rid, "msg": {"type": "error", "name": type(e).__name__, "value": str(e), "traceback": tb}})
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = saved_out, saved_err
        os.environ.clear()
        os.environ.update(saved_env)
    _send({"id": rid, "msg": {"type": "number_of_executions", "execution_count": ctx.count}})
    _send({"id": rid, "msg": {"type": "end_of_execution"}})
    return {}


def _handle(req):
    op = req.get("op")
    if op == "execute":
        return _execute(req.get("id"), req)
    if op == "create_context":
        language = req.get("language") or "python"
        if language != "python":
            return {"error": {"status": 400, "message": "language '%s' is not supported by SPACE (python only)" % language}}
        ctx = Context(language, req.get("cwd"))
        _contexts[ctx.id] = ctx
        return {"result": ctx.info()}
    if op == "list_contexts":
        return {"result": [c.info() for c in _contexts.values()]}
    ctx = _contexts.get(req.get("context_id"))
    if ctx is None:
        return {"error": {"status": 404, "message": "Context %s not found" % req.get("context_id")}}
    if op == "delete_context":
        del _contexts[ctx.id]
        return {}
    if op == "restart_context":
        ctx.reset()
        return {}
    return {"error": {"status": 400, "message": "unknown op"}}


def main():
    while True:
        try:
            line = sys.stdin.readline()
        except KeyboardInterrupt:
            continue  # an interrupt meant for code that already finished
        if not line:
            return
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("request is not an object")
        except ValueError as e:
            _send({"id": None, "done": True, "error": {"status": 400, "message": str(e)}})
            continue
        try:
            reply = _handle(req)
        except KeyboardInterrupt:
            reply = {"error": {"status": 500, "message": "interrupted"}}
        reply.update({"id": req.get("id"), "done": True})
        _send(reply)


main()
