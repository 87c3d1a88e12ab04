#!/usr/bin/env python3
"""Capture what pi (0.73.1, or 0.87.1 with PI pointing at it) sends to a provider and what it
makes of given response bytes.

  from cap import run_pi, Reply
  events, requests = run_pi(provider, model, env, replies, prompts, models_json=..., settings=..., auth=...)
"""
import base64, json, os, shutil, subprocess, sys, tempfile, threading, time, zlib, struct
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
PI = os.environ.get("PI", "pi")  # pi 0.73.1 (or 0.87.1: fixtures then go under fixtures/087/)


class Reply:
    def __init__(self, body=b"", status=200, headers=None, chunk=0, ctype="text/event-stream", cut=False):
        self.body = body.encode() if isinstance(body, str) else body
        self.status = status
        self.headers = dict(headers or {})
        self.headers.setdefault("content-type", ctype)
        self.chunk = chunk
        self.cut = cut


class Server:
    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []
        self.lock = threading.Lock()
        srv = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def handle_any(self):
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else b""
                if self.headers.get("transfer-encoding", "").lower() == "chunked":
                    body = b""
                    while True:
                        line = self.rfile.readline().strip()
                        size = int(line, 16)
                        if size == 0:
                            self.rfile.readline()
                            break
                        body += self.rfile.read(size)
                        self.rfile.readline()
                if self.headers.get("content-encoding", "").lower() == "zstd":
                    # pi 0.87.1 compresses Codex request bodies.
                    body = subprocess.run(["zstd", "-d", "-c", "-q"], input=body, capture_output=True).stdout
                with srv.lock:
                    rec = {"method": self.command, "path": self.path,
                           "headers": [[k.lower(), v] for k, v in self.headers.items()],
                           "body": body.decode("utf-8", "replace"),
                           "body_b64": base64.b64encode(body).decode()}
                    srv.requests.append(rec)
                    r = srv.replies.pop(0) if srv.replies else Reply('{"error":"script exhausted"}', 500, ctype="application/json")
                self.send_response(r.status)
                for k, v in r.headers.items():
                    self.send_header(k, v)
                if r.status == 200 and not r.cut:
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    size = r.chunk or max(1, len(r.body))
                    for i in range(0, len(r.body), size):
                        piece = r.body[i:i + size]
                        self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                elif r.cut:
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    self.wfile.write(b"%x\r\n" % len(r.body) + r.body + b"\r\n")
                    self.wfile.flush()
                    self.close_connection = True
                else:
                    self.send_header("content-length", str(len(r.body)))
                    self.end_headers()
                    self.wfile.write(r.body)
                    self.wfile.flush()

            do_POST = handle_any
            do_GET = handle_any
            do_PUT = handle_any

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def close(self):
        self.httpd.shutdown()


def run_pi(args, env, replies, prompts, files=None, pi=PI, timeout=60, keep=None, server=None, cwd_files=None):
    """files: {relpath under scratch: content}; agent dir is scratch/agent, HOME scratch/home.
    prompts: list of messages (each waits for agent_end). Returns (stdout msgs, requests, scratch)."""
    srv = server or Server(replies)
    scratch = tempfile.mkdtemp(prefix="cap-")
    for d in ["agent", "home", "cwd", "tmp"]:
        os.makedirs(os.path.join(scratch, d))
    for rel, content in (files or {}).items():
        p = os.path.join(scratch, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if callable(content):
            content = content(srv)
        with open(p, "w") as f:
            f.write(content.replace("{PORT}", str(srv.port)).replace("{SCRATCH}", scratch) if isinstance(content, str) else json.dumps(content))
    for rel, content in (cwd_files or {}).items():
        with open(os.path.join(scratch, "cwd", rel), "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())
    e = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": os.path.join(scratch, "home"),
         "PI_CODING_AGENT_DIR": os.path.join(scratch, "agent"), "TMPDIR": os.path.join(scratch, "tmp"),
         "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
    for k, v in env.items():
        e[k] = v.replace("{PORT}", str(srv.port)).replace("{SCRATCH}", scratch)
    p = subprocess.Popen([pi, "--mode", "rpc", "--no-session"] + args, cwd=os.path.join(scratch, "cwd"), env=e,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = []
    lines = []
    def reader():
        for line in p.stdout:
            lines.append(line)
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    deadline = time.time() + timeout
    seen = 0
    for msg in prompts:
        cmd = msg if isinstance(msg, dict) else {"type": "prompt", "message": msg}
        p.stdin.write((json.dumps(cmd) + "\n").encode())
        p.stdin.flush()
        if cmd.get("type") != "prompt":
            time.sleep(1.5)
            continue
        done = False
        while time.time() < deadline and not done:
            while seen < len(lines):
                try:
                    m = json.loads(lines[seen])
                    if m.get("type") == "message_end":
                        m["_raw"] = lines[seen].decode().rstrip("\n")
                except Exception:
                    m = {"raw": lines[seen].decode(errors="replace")}
                seen += 1
                out.append(m)
                if m.get("type") == "agent_end" or (m.get("type") == "response" and m.get("success") is False):
                    done = True
            time.sleep(0.02)
        # let auto-retry etc settle
        time.sleep(0.3)
    p.stdin.close()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
    t.join(2)
    while seen < len(lines):
        try:
            out.append(json.loads(lines[seen]))
        except Exception:
            out.append({"raw": lines[seen].decode(errors="replace")})
        seen += 1
    err = p.stderr.read().decode(errors="replace")
    if server is None:
        srv.close()
    if keep is None:
        shutil.rmtree(scratch, ignore_errors=True)
    return out, srv.requests, err


def assistant_messages(events):
    return [e["message"] for e in events if e.get("type") == "message_end" and e["message"].get("role") == "assistant"]


# ---------------------------------------------------------------- AWS eventstream
def es_frame(headers, payload):
    hb = b""
    for k, v in headers.items():
        kb = k.encode()
        vb = v.encode()
        hb += bytes([len(kb)]) + kb + bytes([7]) + struct.pack(">H", len(vb)) + vb
    total = 12 + len(hb) + len(payload) + 4
    prelude = struct.pack(">II", total, len(hb))
    pc = struct.pack(">I", zlib.crc32(prelude) & 0xffffffff)
    msg = prelude + pc + hb + payload
    return msg + struct.pack(">I", zlib.crc32(msg) & 0xffffffff)


def es_event(kind, obj):
    return es_frame({":event-type": kind, ":content-type": "application/json", ":message-type": "event"},
                    json.dumps(obj, separators=(",", ":")).encode())


def es_exception(kind, message):
    return es_frame({":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"},
                    json.dumps({"message": message}).encode())
