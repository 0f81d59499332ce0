"""The admin page's one script (served inline under its nonce, admin_page.py).

Every :data:`REFRESH` seconds it fetches ``/status`` and redraws the live sections —
backends, sessions, tools, the charts (the same shapes as charts.py, built with
``createElementNS``), recent requests with their policy decisions — and on demand
``/status/surface`` for the tool-surface view. Text goes in with ``textContent`` only,
never as markup. A failed fetch says so in the header; the next tick tries again.
"""

from __future__ import annotations

REFRESH = 2  # seconds between the page's /status fetches

SCRIPT = """
(function(){
var NS='http://www.w3.org/2000/svg',W=220,H=44,P=3,G=5;
function el(t,c,x){var e=document.createElement(t);if(c)e.className=c;\
if(x!==undefined&&x!==null)e.textContent=String(x);return e}
function sv(t,a){var e=document.createElementNS(NS,t);for(var k in a)e.setAttribute(k,String(a[k]));return e}
function td(x,c){return el('td',c,x)}
function q(id){return document.getElementById(id)}
function tn(t){return t.name.slice(-t.original.length)===t.original?t.name:t.name+' (as '+t.original+')'}
function hm(ts){if(typeof ts!=='number')return'';return new Date(ts*1000).toISOString().substr(11,8)}
function fill(id,rows){var b=q(id);if(!b)return;b.replaceChildren.apply(b,rows)}
function frame(kind,n,label){var s=sv('svg',{'class':'chart '+kind,'data-points':n,viewBox:'0 0 '+W+' '+H,\
width:W,height:H,role:'img','aria-label':label});\
s.appendChild(sv('rect',{'class':'frame',x:0,y:0,width:W,height:H,fill:'#fafbfc',stroke:'#dde1e6'}));return s}
function latency(se,id){var n=se.length,top=Math.max.apply(null,se.map(function(s){return s[1]}).concat([0]))||1,\
st=(W-2*P)/Math.max(n-1,1),xy=se.map(function(s,i){return[P+i*st,H-P-s[1]/top*(H-2*P)]}),\
s=frame('latency',n,'latency of '+id+"'s last "+n+' calls, up to '+top+' ms');\
if(n>1)s.appendChild(sv('polyline',{points:xy.map(function(p){return p[0].toFixed(1)+','+p[1].toFixed(1)}).join(' '),\
fill:'none',stroke:'#1b6ef3','stroke-width':1.5}));\
xy.forEach(function(p,i){s.appendChild(sv('circle',{'class':se[i][2]?'point':'point failed',cx:p[0].toFixed(1),\
cy:p[1].toFixed(1),r:2,fill:se[i][2]?'#1b6ef3':'#d11'}))});return s}
function errors(se,id){var gs=[];for(var i=0;i<se.length;i+=G)gs.push(se.slice(i,i+G));\
var w=(W-2*P)/Math.max(gs.length,1),bad=0,s=frame('errors',gs.length,'');\
gs.forEach(function(g,i){var f=g.filter(function(x){return!x[2]}).length,r=f/g.length,x=P+i*w,h=r*(H-2*P);bad+=f;\
s.appendChild(sv('rect',{'class':'bar','data-rate':r.toFixed(2),x:(x+1).toFixed(1),y:P,width:(w-2).toFixed(1),\
height:H-2*P,fill:'#eceff2'}));if(f)s.appendChild(sv('rect',{'class':'failed',x:(x+1).toFixed(1),\
y:(H-P-h).toFixed(1),width:(w-2).toFixed(1),height:h.toFixed(1),fill:'#d11'}))});\
s.setAttribute('aria-label','error rate of '+id+"'s last "+se.length+' calls: '+\
(se.length?Math.round(100*bad/se.length)+'%':'no calls'));return s}
function summary(b){var se=b.series||[];if(!se.length)return'no calls yet';\
var bad=se.filter(function(x){return!x[2]}).length;\
return(b.calls&&b.calls.p50_ms!==null?'p50 '+b.calls.p50_ms+' ms · ':'')+\
'max '+Math.max.apply(null,se.map(function(s){return s[1]}))+' ms · '+Math.round(100*bad/se.length)+'% errors'}
function decision(d){if(!d)return'';var t=d.decision;if(d.by)t+=' · '+d.by+(d.point?' @'+d.point:'');\
if(d.reason)t+=': '+d.reason;if(d.mutated_by)t+=' · changed by '+d.mutated_by.join(', ');\
if(d.shadow_by)t+=' · audit-mode: '+d.shadow_by.join(', ');return t}
function readiness(s){if(!s.ready)return'not ready: '+(s.not_ready||[]).join(', ')+' (/readyz 503)';\
return(s.degraded||[]).length?'degraded: '+s.degraded.join(', ')+' (/readyz 200: none is required)':'ready'}
function draw(s){
 fill('backends-body',s.backends.map(function(b){var r=el('tr');r.dataset.backend=b.id;r.dataset.state=b.state;
  r.appendChild(td(b.id));var c=td('');c.appendChild(el('span','state '+b.state,b.state));r.appendChild(c);
  r.appendChild(td(b.kind+' '+b.target));
  r.appendChild(td((b.children?(b.children.leased+' leased, '+b.children.spare+' spare / '+b.children.max+\
(b.children.pids.length?' (pids '+b.children.pids.join(', ')+')':'')):'')+\
(b.sandbox?' \u00b7 sandbox '+b.sandbox.profile+(b.sandbox.denied?' \u00b7 '+b.sandbox.denied+' denied ('+\
b.sandbox.denials[b.sandbox.denials.length-1].denial+')':'')+(b.sandbox.egress&&b.sandbox.egress.refused?\
' \u00b7 egress refused '+b.sandbox.egress.refused:''):'')));
  r.appendChild(td(b.sessions.open+(b.sessions.eras.length?' ('+b.sessions.eras.join(', ')+')':'')));
  r.appendChild(td(b.tool_count));
  r.appendChild(td(b.calls?b.calls.calls+' / '+b.calls.errors:''));
  r.appendChild(td(b.calls&&b.calls.p50_ms!==null?b.calls.p50_ms+' ms':''));
  r.appendChild(td(b.last_error?hm(b.last_error.at)+' '+\
b.last_error.message:(b.last_call_error?hm(b.last_call_error.at)+' '+b.last_call_error.method+': '+\
b.last_call_error.kind:''),'err'));
  return r}));
 fill('charts-body',s.backends.map(function(b){var r=el('tr');r.dataset.backend=b.id;r.appendChild(td(b.id));\
var se=b.series||[],a=td(''),e=td('');a.appendChild(latency(se,b.id));e.appendChild(errors(se,b.id));\
r.appendChild(a);r.appendChild(e);r.appendChild(td(summary(b),'muted'));return r}));
 var h=s.sessions.handshake;\
fill('sessions-body',[el('li',null,'handshake era: '+h.open+\
' open')].concat(Object.keys(h.by_principal).map(function(p){return el('li',null,p+': '+h.by_principal[p])}\
)).concat([el('li','muted',s.sessions.modern.note)]));
 var sh=s.sessions.shared_backend_sessions;\
fill('shared-body',sh.length?sh.map(function(x){return el('li',null,x.backend+' ('+x.era+')'+(x.open?'':' closed'))}\
):[el('li','muted','none')]);
 fill('tools-body',s.backends.map(function(b){var r=el('tr');r.appendChild(td(b.id));\
r.appendChild(td(b.tools.map(tn).join(', ')||'—'));return r}));
 fill('requests-body',s.requests.slice(0,30).map(function(rq){var r=el('tr'),d=rq.decision;\
[hm(rq.at),rq.backend,rq.method,rq.tool||'',rq.kind,rq.code===null?'':rq.code,rq.ms+' ms',\
rq.subject||''].forEach(function(x){r.appendChild(td(x))});\
r.appendChild(td(decision(d),d&&d.decision==='deny'?'deny':null));\
r.dataset.decision=d?d.decision:'';if(rq.kind!=='ok')r.className='err';return r}));
 var st=q('updated');\
if(st){st.textContent=readiness(s)+' · updated '+hm(s.time);\
st.className='readiness '+(!s.ready?'bad':(s.degraded||[]).length?'warn':'ok')}
}
function options(id,values){var e=q(id),keep=e.value;if(e.options.length===values.length)return;\
e.replaceChildren.apply(e,values.map(function(v){var o=el('option',null,v);o.value=v;return o}));\
if(values.indexOf(keep)>=0)e.value=keep}
function drawSurface(s){var note=q('surface-note');
 if(s.error&&s.error.status){note.textContent='refused: '+s.error.message;note.className='err';return}
 options('surface-identity',s.choices.identities.map(function(i){return i.id}));options('surface-mode',s.choices.modes);
 fill('surface-body',s.tools.map(function(t){var r=el('tr');r.dataset.tool=t.name;r.appendChild(td(t.name));\
r.appendChild(td(t.backend!==undefined?t.backend:t.mode+' mode'));r.appendChild(td(t.arguments.join(', ')));\
r.appendChild(td(t.description,'muted'));return r}));
 fill('surface-hidden',s.hidden.length?s.hidden.map(function(t){return el('li',null,t.name+' ('+t.backend+')')}):\
[el('li','muted','none')]);
 var t=s.identity.subject+' · '+s.mode.name+' mode: '+s.total+(s.total===1?' tool':' tools');\
if(s.hidden_total)t+=', '+s.hidden_total+' hidden by policy';\
if(s.not_listed.length)t+='; not in the catalogue: '+s.not_listed.join(', ');\
if(s.refused)t+='; refused before any list: '+s.refused.status+' '+s.refused.message;\
if(s.list_error)t+='; the list fails: '+s.list_error.message;note.textContent=t;note.className='muted';
 q('surface').dataset.identity=s.identity.id;q('surface').dataset.mode=s.mode.name}
function surface(){var p=new URLSearchParams(),i=q('surface-identity').value;p.set('identity',i);\
if(i==='custom'){p.set('subject',q('surface-subject').value);p.set('claims',q('surface-claims').value);\
p.set('scopes',q('surface-scopes').value)}p.set('mode',q('surface-mode').value);\
q('surface-custom').hidden=i!=='custom';\
fetch('/status/surface?'+p.toString(),{cache:'no-store'}).then(function(r){return r.json()}).then(drawSurface)\
.catch(function(){q('surface-note').textContent='admin listener unreachable'})}
['surface-identity','surface-mode'].forEach(function(id){q(id).addEventListener('change',surface)});
q('surface-show').addEventListener('click',surface);
function tick(){fetch('/status',{cache:'no-store'}).then(function(r){return r.json()}\
).then(draw).catch(function(){var st=q('updated');\
if(st)st.textContent='admin listener unreachable'})}
setInterval(tick,REFRESH_MS);
})();
"""
