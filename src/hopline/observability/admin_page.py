"""The admin page (``GET /`` on the admin listener): plain HTML rendered here from the
``/status``, ``/config`` and ``/status/surface`` data, inline CSS and SVG (charts.py),
no external asset and no build step.

Everything shown is escaped (:func:`html.escape`, quotes included). A small inline
script (admin_script.py; allowed by its nonce only, under a strict
Content-Security-Policy) fetches ``/status`` every :data:`REFRESH` seconds and redraws
the live sections with ``textContent``, never as markup, so a backend's state, its
charts and the recent requests with their policy decisions are current within seconds;
it fetches ``/status/surface`` when the operator picks an identity or a tool mode.
Without script the page shows what it was rendered with (the surface of ``anonymous``
in the configured mode).
"""

from __future__ import annotations

import datetime
import html
import json
from typing import Any

from hopline.observability import charts
from hopline.observability.admin_script import REFRESH, SCRIPT


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _when(ts: Any) -> str:
    if not isinstance(ts, (int, float)):
        return ""
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%H:%M:%S")


CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}
header{background:#1b1f24;color:#fff;padding:10px 18px;display:flex;gap:18px;align-items:baseline}
header h1{font-size:17px;margin:0}header span{opacity:.8}
nav a{color:#9cc3ff;margin-right:12px}
main{padding:12px 18px}section{background:#fff;border:1px solid #dde1e6;border-radius:6px;margin:0 0 14px;\
padding:10px 14px}
h2{font-size:15px;margin:2px 0 8px}table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eceff2;vertical-align:top}th{font-weight:600;\
background:#fafbfc}
.state{font-weight:700;padding:1px 8px;border-radius:10px;white-space:nowrap}
.up{background:#d8f5dd;color:#135c22}.down{background:#fde0e0;color:#8a1010}.idle{background:#eceff2;color:#444}
.breaker_open,.breaker_half_open{background:#ffe9c7;color:#7a4300}.disabled{background:#eee;color:#888}
.starting{background:#e3ecff;color:#1c3f8a}.readiness{padding:1px 8px;border-radius:10px}\
.readiness.ok{background:#d8f5dd;color:#135c22}.readiness.warn{background:#ffe9c7;color:#7a4300}\
.readiness.bad{background:#fde0e0;color:#8a1010}
.err{color:#8a1010}.muted{color:#6a737d}code,pre{font:12px ui-monospace,monospace}pre{white-space:pre-wrap;margin:0;\
max-height:480px;overflow:auto}
ul{margin:0;padding-left:18px}
td.deny{color:#8a1010;font-weight:600}.chart{display:block}
.controls{display:flex;gap:10px;flex-wrap:wrap;align-items:end;margin:0 0 8px}.controls label{display:flex;\
flex-direction:column;font-size:12px;color:#444}.controls textarea{font:12px ui-monospace,monospace;width:260px;\
height:34px}
"""


def readiness_text(status: dict[str, Any]) -> str:
    """The header's verdict, the script's too (admin_script.py): ``ready`` only when every
    backend is; ``not ready: a`` while /readyz is 503; ``degraded: b`` when /readyz is 200
    but a backend (not ``required``) is down, starting or withdrawn (README "Readiness")."""
    if not status["ready"]:
        return "not ready: " + ", ".join(status.get("not_ready") or ()) + " (/readyz 503)"
    if status.get("degraded"):
        return "degraded: " + ", ".join(status["degraded"]) + " (/readyz 200: none is required)"
    return "ready"


def _readiness_class(status: dict[str, Any]) -> str:
    return "readiness " + ("bad" if not status["ready"] else "warn" if status.get("degraded") else "ok")


def _tool(t: dict[str, str]) -> str:
    """The exposed name, and the backend's own where the gateway had to alias it."""
    return t["name"] if t["name"].endswith(t["original"]) else f"{t['name']} (as {t['original']})"


def _backend_rows(status: dict[str, Any]) -> str:
    rows = []
    for b in status["backends"]:
        ch = b.get("children")
        children = (
            f"{ch['leased']} leased, {ch['spare']} spare / {ch['max']}"
            + (f" (pids {', '.join(map(str, ch['pids']))})" if ch["pids"] else "")
            if ch
            else ""
        )
        if b.get("sandbox"):  # a stdio backend: the profile its children run under, what they were denied
            box = b["sandbox"]
            children += f" · sandbox {box['profile']}"
            if box.get("denied"):
                children += f" · {box['denied']} denied ({box['denials'][-1]['denial']})"
            if box.get("egress", {}).get("refused"):
                children += f" · egress refused {box['egress']['refused']}"
        s = b["sessions"]
        calls = b.get("calls")
        err = b.get("last_error")
        call_err = b.get("last_call_error")
        error = (
            f"{_when(err['at'])} {err['message']}"
            if err
            else (f"{_when(call_err['at'])} {call_err['method']}: {call_err['kind']}" if call_err else "")
        )
        held = b.get("caller_failures")
        if held:  # one caller's credential refused holds back that caller only: say how many
            last = held["last_error"]
            said = f"{held['callers']} caller(s) held back: {_when(last['at'])} {last['message']}"
            error = f"{error}; {said}" if error else said
        counts = f"{calls['calls']} / {calls['errors']}" if calls else ""
        p50 = f"{calls['p50_ms']} ms" if calls and calls["p50_ms"] is not None else ""
        eras = " (" + ", ".join(s["eras"]) + ")" if s["eras"] else ""
        rows.append(
            f'<tr data-backend="{_e(b["id"])}" data-state="{_e(b["state"])}"><td>{_e(b["id"])}</td>'
            f'<td><span class="state {_e(b["state"])}">{_e(b["state"])}</span></td>'
            f"<td>{_e(b['kind'])} {_e(b['target'])}</td><td>{_e(children)}</td><td>{_e(s['open'])}{_e(eras)}</td>"
            f"<td>{_e(b['tool_count'])}</td><td>{_e(counts)}</td><td>{_e(p50)}</td>"
            f'<td class="err">{_e(error)}</td></tr>'
        )
    return "".join(rows)


def decision(d: dict[str, Any] | None) -> str:
    """A request's policy decision in words (the page script's ``decision`` says the same)."""
    if not d:
        return ""
    text = d["decision"]
    if d.get("by"):
        text += f" · {d['by']}" + (f" @{d['point']}" if d.get("point") else "")
    if d.get("reason"):
        text += f": {d['reason']}"
    if d.get("mutated_by"):
        text += " · changed by " + ", ".join(map(str, d["mutated_by"]))
    if d.get("shadow_by"):
        text += " · audit-mode: " + ", ".join(map(str, d["shadow_by"]))
    return text


def _request_rows(status: dict[str, Any]) -> str:
    rows = []
    for q in status["requests"][:30]:
        d = q.get("decision")
        cells = "".join(
            f"<td>{_e(x)}</td>"
            for x in (
                _when(q["at"]),
                q["backend"],
                q["method"],
                q["tool"] or "",
                q["kind"],
                "" if q["code"] is None else q["code"],
                f"{q['ms']} ms",
                q["subject"] or "",
            )
        )
        deny = ' class="deny"' if d and d.get("decision") == "deny" else ""
        rows.append(
            f'<tr data-decision="{_e(d["decision"] if d else "")}"{" class=err" if q["kind"] != "ok" else ""}>'
            f"{cells}<td{deny}>{_e(decision(d))}</td></tr>"
        )
    return "".join(rows)


def _chart_rows(status: dict[str, Any]) -> str:
    rows = []
    for b in status["backends"]:
        series = b.get("series") or []
        bad = sum(1 for s in series if not s[2])
        calls = b.get("calls") or {}
        text = (
            ("" if calls.get("p50_ms") is None else f"p50 {calls['p50_ms']} ms · ")
            + f"max {max(s[1] for s in series)} ms · {round(100 * bad / len(series))}% errors"
            if series
            else "no calls yet"
        )
        rows.append(
            f'<tr data-backend="{_e(b["id"])}"><td>{_e(b["id"])}</td><td>{charts.latency(series, b["id"])}</td>'
            f'<td>{charts.error_rate(series, b["id"])}</td><td class="muted">{_e(text)}</td></tr>'
        )
    return "".join(rows)


def _options(values: list[str], chosen: str) -> str:
    return "".join(f'<option value="{_e(v)}"{" selected" if v == chosen else ""}>{_e(v)}</option>' for v in values)


def _surface(surface: dict[str, Any] | None) -> str:
    """The tool surface of one identity in one mode (compose/surface.py), and the controls to pick another."""
    if surface is None:
        return '<p class="muted">not available</p>'
    tools = "".join(
        f'<tr data-tool="{_e(t["name"])}"><td>{_e(t["name"])}</td>'
        f"<td>{_e(t['backend'] if 'backend' in t else t['mode'] + ' mode')}</td>"
        f'<td>{_e(", ".join(t["arguments"]))}</td><td class="muted">{_e(t["description"])}</td></tr>'
        for t in surface["tools"]
    )
    hidden = "".join(f"<li>{_e(t['name'])} ({_e(t['backend'])})</li>" for t in surface["hidden"])
    ident, mode = surface["identity"], surface["mode"]
    note = f"{ident['subject']} · {mode['name']} mode: {surface['total']} tool{'' if surface['total'] == 1 else 's'}"
    if surface["hidden_total"]:
        note += f", {surface['hidden_total']} hidden by policy"
    if surface["not_listed"]:
        note += "; not in the catalogue: " + ", ".join(surface["not_listed"])
    if surface["refused"]:
        note += f"; refused before any list: {surface['refused']['status']} {surface['refused']['message']}"
    if surface["list_error"]:
        note += f"; the list fails: {surface['list_error']['message']}"
    choices = surface["choices"]
    return f"""<div class="controls"><label>identity<select id="surface-identity">\
{_options([i["id"] for i in choices["identities"]], ident["id"])}</select></label>
<label>tool mode<select id="surface-mode">{_options(choices["modes"], mode["name"])}</select></label>
<span id="surface-custom" hidden><label>subject<input id="surface-subject" maxlength="256" value="custom"></label>
<label>claims (JSON)<textarea id="surface-claims" maxlength="4096">{{}}</textarea></label>
<label>scopes<input id="surface-scopes" maxlength="512"></label></span>
<button id="surface-show" type="button">show</button></div>
<p id="surface-note" class="muted">{_e(note)}</p>
<table><thead><tr><th>tool</th><th>from</th><th>arguments</th><th>description</th></tr></thead>
<tbody id="surface-body">{tools}</tbody></table><h2>Hidden from this identity by policy</h2>
<ul id="surface-hidden">{hidden or '<li class="muted">none</li>'}</ul>"""


def render(
    status: dict[str, Any], config: dict[str, Any] | None, *, nonce: str, surface: dict[str, Any] | None = None
) -> str:
    hs = status["sessions"]["handshake"]
    sessions = f"<li>handshake era: {_e(hs['open'])} open</li>" + "".join(
        f"<li>{_e(p)}: {_e(n)}</li>" for p, n in hs["by_principal"].items()
    )
    sessions += f'<li class="muted">{_e(status["sessions"]["modern"]["note"])}</li>'
    shared = (
        "".join(
            f"<li>{_e(s['backend'])} ({_e(s['era'])}){'' if s['open'] else ' closed'}</li>"
            for s in status["sessions"]["shared_backend_sessions"]
        )
        or "<li class=muted>none</li>"
    )
    tools = "".join(
        f"<tr><td>{_e(b['id'])}</td><td>{_e(', '.join(map(_tool, b['tools'])) or '—')}</td></tr>"
        for b in status["backends"]
    )
    modes = status["tool_modes"]
    modes_text = f"main endpoint: {modes['main']}" + "".join(f"; {p}: {m}" for p, m in modes["endpoints"].items())
    reload = status.get("reload") or {}
    reload_text = (
        "no reload yet"
        if not reload.get("count")
        else f"{reload['count']} reloads; last at {_when(reload.get('at'))}: "
        f"{'ok' if reload.get('ok') else 'failed: ' + str(reload.get('error'))}"
    )
    declaration = json.dumps(status.get("declaration"), indent=2, sort_keys=True)
    config_text = json.dumps(config, indent=2, sort_keys=False) if config is not None else "(not available)"
    script = SCRIPT.replace("REFRESH_MS", str(REFRESH * 1000))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>hopline admin: {_e(status["name"])}</title><style>{CSS}</style></head>
<body><header><h1>hopline · {_e(status["name"])}</h1><span>{_e(status["mode"])} mode</span><span id="updated" \
class="{_readiness_class(status)}">{_e(readiness_text(status))}</span>
<nav><a href="#backends">backends</a><a href="#charts">charts</a><a href="#sessions">sessions</a><a href="#tools">\
tools</a><a href="#surface">surface</a><a href="#requests">requests</a><a href="#declaration">declaration</a>\
<a href="#config">config</a><a href="/status">/status</a><a href="/config">/config</a></nav></header>
<main>
<section id="backends"><h2>Backends</h2><table><thead><tr><th>backend</th><th>state</th><th>target</th><th>\
children</th><th>sessions</th><th>tools</th><th>calls / errors</th><th>p50</th><th>last error</th></tr></thead>
<tbody id="backends-body">{_backend_rows(status)}</tbody></table></section>
<section id="charts"><h2>Latency and error rate</h2><p class="muted">Each backend's last calls, oldest first: \
latency of each call (red: failed) and the share of failed calls per {charts.GROUP} calls.</p>
<table><thead><tr><th>backend</th><th>latency</th><th>error rate</th><th></th></tr></thead>
<tbody id="charts-body">{_chart_rows(status)}</tbody></table></section>
<section id="sessions"><h2>Client sessions</h2><ul id="sessions-body">{sessions}</ul><h2>Shared backend sessions</h2>\
<ul id="shared-body">{shared}</ul></section>
<section id="tools"><h2>Tools by backend</h2><p class="muted">\
{_e(modes_text)}. Names as the last composed tools/list shows them (a backend's own name in parentheses where it had \
to be aliased), before per-caller visibility rules (policy).</p>
<table><thead><tr><th>backend</th><th>tools</th></tr></thead><tbody id="tools-body">{tools}</tbody></table></section>
<section id="surface"><h2>Tool surface as an identity sees it</h2><p class="muted">tools/list exactly as the gateway \
would answer the chosen identity (CEL policy, pinning and open breakers applied) in the chosen tool mode, from the \
catalogue it last composed; nothing is sent to a backend. <a href="/status/surface">/status/surface</a></p>
{_surface(surface)}</section>
<section id="requests"><h2>Recent requests</h2><table><thead><tr><th>at (UTC)</th><th>backend</th><th>method</th><th>\
tool</th><th>kind</th><th>code</th><th>duration</th><th>subject</th><th>policy decision</th></tr></thead>
<tbody id="requests-body">{_request_rows(status)}</tbody></table></section>
<section id="declaration"><h2>Declaration</h2><p class="muted">Reload: {_e(reload_text)}</p><pre>\
{_e(declaration)}</pre></section>
<section id="config"><h2>Configuration (secrets redacted)</h2><pre>{_e(config_text)}</pre></section>
</main><script nonce="{_e(nonce)}">{script}</script></body></html>
"""
