"""The admin page (``GET /`` on the admin listener): plain HTML rendered here from the
``/status`` and ``/config`` data, inline CSS, no external asset and no build step.

Everything shown is escaped (:func:`html.escape`, quotes included). A small inline
script (allowed by its nonce only, under a strict Content-Security-Policy) fetches
``/status`` every :data:`REFRESH` seconds and redraws the live sections with
``textContent``, never as markup, so a backend's state is current within seconds;
without script the page shows what it was rendered with.
"""

from __future__ import annotations

import datetime
import html
import json
from typing import Any

REFRESH = 2  # seconds between the page's /status fetches


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
.err{color:#8a1010}.muted{color:#6a737d}code,pre{font:12px ui-monospace,monospace}pre{white-space:pre-wrap;margin:0;\
max-height:480px;overflow:auto}
ul{margin:0;padding-left:18px}
"""

SCRIPT = """
(function(){
function el(t,c,x){var e=document.createElement(t);if(c)e.className=c;\
if(x!==undefined&&x!==null)e.textContent=String(x);return e}
function td(x,c){return el('td',c,x)}
function tn(t){return t.name.slice(-t.original.length)===t.original?t.name:t.name+' (as '+t.original+')'}
function hm(ts){if(typeof ts!=='number')return'';return new Date(ts*1000).toISOString().substr(11,8)}
function fill(id,rows){var b=document.getElementById(id);if(!b)return;b.replaceChildren.apply(b,rows)}
function draw(s){
 fill('backends-body',s.backends.map(function(b){var r=el('tr');r.dataset.backend=b.id;r.dataset.state=b.state;
  r.appendChild(td(b.id));var c=td('');c.appendChild(el('span','state '+b.state,b.state));r.appendChild(c);
  r.appendChild(td(b.kind+' '+b.target));
  r.appendChild(td(b.children?(b.children.leased+' leased, '+b.children.spare+' spare / '+b.children.max+\
(b.children.pids.length?' (pids '+b.children.pids.join(', ')+')':'')):''));
  r.appendChild(td(b.sessions.open+(b.sessions.eras.length?' ('+b.sessions.eras.join(', ')+')':'')));
  r.appendChild(td(b.tool_count));
  r.appendChild(td(b.calls?b.calls.calls+' / '+b.calls.errors:''));
  r.appendChild(td(b.calls&&b.calls.p50_ms!==null?b.calls.p50_ms+' ms':''));
  r.appendChild(td(b.last_error?hm(b.last_error.at)+' '+\
b.last_error.message:(b.last_call_error?hm(b.last_call_error.at)+' '+b.last_call_error.method+': '+\
b.last_call_error.kind:''),'err'));
  return r}));
 var h=s.sessions.handshake;\
fill('sessions-body',[el('li',null,'handshake era: '+h.open+\
' open')].concat(Object.keys(h.by_principal).map(function(p){return el('li',null,p+': '+h.by_principal[p])}\
)).concat([el('li','muted',s.sessions.modern.note)]));
 var sh=s.sessions.shared_backend_sessions;\
fill('shared-body',sh.length?sh.map(function(x){return el('li',null,x.backend+' ('+x.era+')'+(x.open?'':' closed'))}\
):[el('li','muted','none')]);
 fill('tools-body',s.backends.map(function(b){var r=el('tr');r.appendChild(td(b.id));\
r.appendChild(td(b.tools.map(tn).join(', ')||'—'));return r}));
 fill('requests-body',s.requests.slice(0,30).map(function(q){var r=el('tr');\
[hm(q.at),q.backend,q.method,q.tool||'',q.kind,q.code===null?'':q.code,q.ms+' ms',\
q.subject||''].forEach(function(x){r.appendChild(td(x))});if(q.kind!=='ok')r.className='err';return r}));
 var st=document.getElementById('updated');\
if(st)st.textContent='updated '+hm(s.time)+(s.ready?' · ready':' · degraded');
}
function tick(){fetch('/status',{cache:'no-store'}).then(function(r){return r.json()}\
).then(draw).catch(function(){var st=document.getElementById('updated');\
if(st)st.textContent='admin listener unreachable'})}
setInterval(tick,REFRESH_MS);
})();
"""


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
        s = b["sessions"]
        calls = b.get("calls")
        err = b.get("last_error")
        call_err = b.get("last_call_error")
        error = (
            f"{_when(err['at'])} {err['message']}"
            if err
            else (f"{_when(call_err['at'])} {call_err['method']}: {call_err['kind']}" if call_err else "")
        )
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


def render(status: dict[str, Any], config: dict[str, Any] | None, *, nonce: str) -> str:
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
    requests = "".join(
        f"<tr{' class=err' if q['kind'] != 'ok' else ''}>"
        + "".join(
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
        + "</tr>"
        for q in status["requests"][:30]
    )
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
<body><header><h1>hopline · {_e(status["name"])}</h1><span>{_e(status["mode"])} mode</span><span id="updated">\
{"ready" if status["ready"] else "degraded"}</span>
<nav><a href="#backends">backends</a><a href="#sessions">sessions</a><a href="#tools">tools</a><a href="#requests">\
requests</a><a href="#declaration">declaration</a><a href="#config">config</a><a href="/status">/status</a>\
<a href="/config">/config</a></nav></header>
<main>
<section id="backends"><h2>Backends</h2><table><thead><tr><th>backend</th><th>state</th><th>target</th><th>\
children</th><th>sessions</th><th>tools</th><th>calls / errors</th><th>p50</th><th>last error</th></tr></thead>
<tbody id="backends-body">{_backend_rows(status)}</tbody></table></section>
<section id="sessions"><h2>Client sessions</h2><ul id="sessions-body">{sessions}</ul><h2>Shared backend sessions</h2>\
<ul id="shared-body">{shared}</ul></section>
<section id="tools"><h2>Tool surface</h2><p class="muted">\
{_e(modes_text)}. Names as the last composed tools/list shows them (a backend's own name in parentheses where it had \
to be aliased), before per-caller visibility rules (policy).</p>
<table><thead><tr><th>backend</th><th>tools</th></tr></thead><tbody id="tools-body">{tools}</tbody></table></section>
<section id="requests"><h2>Recent requests</h2><table><thead><tr><th>at (UTC)</th><th>backend</th><th>method</th><th>\
tool</th><th>kind</th><th>code</th><th>duration</th><th>subject</th></tr></thead>
<tbody id="requests-body">{requests}</tbody></table></section>
<section id="declaration"><h2>Declaration</h2><p class="muted">Reload: {_e(reload_text)}</p><pre>\
{_e(declaration)}</pre></section>
<section id="config"><h2>Configuration (secrets redacted)</h2><pre>{_e(config_text)}</pre></section>
</main><script nonce="{_e(nonce)}">{script}</script></body></html>
"""
