#!/usr/bin/env python3
"""The oracle's fake LLM (`<oracle>/fakellm.py`, same arguments) with one more timing mark:
`request_body_read`, taken when the request body has been read off the socket, before the
server parses and logs it. The oracle's own `request_received` mark comes after parsing the
JSON and writing it to the request log, which for a 12 MB body is most of what a long-session
benchmark would measure; `request_body_read` is the request on the wire.

  fakellm_wire.py --oracle DIR [fakellm.py arguments...]
"""
import importlib.util
import os
import sys
import time

args = sys.argv[1:]
oracle = args[args.index("--oracle") + 1]
del args[args.index("--oracle"):args.index("--oracle") + 2]
spec = importlib.util.spec_from_file_location("fakellm", os.path.join(oracle, "fakellm.py"))
fake = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fake)

original = fake.Handler.do_POST


def do_POST(self):
    real = self.rfile
    server = self.server

    class Reader:
        def read(self, n=-1):
            data = real.read(n)
            server.marks.write({"ts": time.time(), "mark": "request_body_read", "bytes": len(data)})
            return data

        def __getattr__(self, name):
            return getattr(real, name)

    self.rfile = Reader()
    try:
        original(self)
    finally:
        self.rfile = real


fake.Handler.do_POST = do_POST
fake.main(args)
