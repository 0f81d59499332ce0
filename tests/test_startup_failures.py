"""Start-up failures a newcomer can read (issue 29 items 11 and 12): a start that outlasts
``routing.startup_timeout`` names the limit and the setting, a server that writes junk to
stdout is quoted (bounded, redacted), a crash shows its exit status and the tail of its
stderr, a backend that comes up late says so; the admin view and /readyz say the same
about failed backends as the README. Real ``hopline serve`` processes and real children
(``python -c`` scripts)."""

from __future__ import annotations

import json

from tests.test_first_hour import DEMO, backend_lines, gateway_yaml

TOKEN = "sk-live-0123456789abcdefABCDEF"
ENV_SECRET = "hunter2hunter2"


def args(code: str, *extra: str) -> str:
    return "args: " + json.dumps(["-c", code, *extra])


CRASH = args("import sys; sys.stderr.write('Error: cannot find module foo\\nat line 3\\n'); sys.exit(7)")
JUNK = args(f"import os, sys, time; print('Welcome to junk v1 token={TOKEN}'); print('key ' + os.environ['API_KEY']); "
            "sys.stdout.flush(); time.sleep(3600)") + f", env: {{API_KEY: {ENV_SECRET}}}"


def gated(flag) -> str:
    return args("import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
                "os.execv(sys.executable, [sys.executable, '-m', 'hopline.demo'])", str(flag))


def test_start_failures_say_why_in_serves_log(tmp_path, hopline_serve_eager):
    flag = tmp_path / "go"
    config = gateway_yaml(tmp_path, {"crash": CRASH, "junk": JUNK, "gated": gated(flag)}, "routing: {startup_timeout: 5}\n")
    proc = hopline_serve_eager(str(config))
    limit = "did not start within 5 s (routing.startup_timeout; cold npx servers often need more)"
    assert backend_lines(proc, 3) == [
        "hopline serve: backend crash: unavailable: backend exited with status 7; its stderr ended: "
        "'Error: cannot find module foo' / 'at line 3'",
        f"hopline serve: backend gated: unavailable: {limit}",
        f"hopline serve: backend junk: unavailable: {limit}; it wrote to stdout what is not JSON-RPC: "
        "'Welcome to junk v1 token=<redacted>'",
    ]
    flag.write_text("go")
    late = proc.wait_line(r"^hopline serve: backend gated: up .*$").group(0)
    assert late.startswith("hopline serve: backend gated: up (4 tools), ")
    assert late.endswith(" s after its start (routing.startup_timeout is 5 s)")
    log = "".join(proc.stderr)
    assert "WARNING hopline.stdio: junk: dropped a frame that is not JSON-RPC (" in log
    assert "): 'key <redacted>'\n" in log  # the backend's own env value, quoted redacted
    assert TOKEN not in log and ENV_SECRET not in log

