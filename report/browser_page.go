package report

import "html/template"

// browserTemplate is the debate browser. html/template escapes every name and number, and
// writes the data as JSON with <, > and & escaped, so no text of a problem or response
// can close the script element; the script puts text into the page with textContent
// only, never as markup.
var browserTemplate = template.Must(template.New("browser").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Debates: {{range $i, $t := .Title}}{{if $i}} vs {{end}}{{$t}}{{end}}</title>
<style>{{.Style}}
.bar{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #ddd;z-index:1}
.bar label{margin-right:1em}
.problem{border:1px solid #ccc;border-radius:4px;padding:.6em;margin:.8em 0}
.debate{border-left:3px solid #9ab;padding-left:.6em;margin:.6em 0}
.agents{display:grid;grid-template-columns:repeat(auto-fit,minmax(22em,1fr));gap:.5em}
.resp{border:1px solid #e3e3e3;padding:.3em}
.ok{color:#06702b;font-weight:bold}.bad{color:#b00020;font-weight:bold}
.tag{display:inline-block;background:#eef;border-radius:3px;padding:0 .4em;margin-right:.3em;font-size:12px}
</style>
</head>
<body>
<h1>Debates: {{range $i, $t := .Title}}{{if $i}} vs {{end}}{{$t}}{{end}}</h1>
<p class="muted">Accuracy in percent, uncertainty in nats; turns count from 0 (the paper's T is turn+1).
Outcomes are per trajectory, in strict grading: right → wrong and wrong → right compare an agent's
answer at turn 0 with its last; disagreement and unanimous but wrong look at the agents' last answers.</p>
{{range .Tables}}<table><caption>{{.Caption}}</caption>
<tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{end}}{{range .Figures}}<figure style="width:{{.Width}}">{{.SVG}}</figure>
{{end}}
<h2>Problems</h2>
<div class="bar">
<label>run <select id="run"><option value="">all</option>{{range .Data.Runs}}<option>{{.}}</option>{{end}}</select></label>
<label>dataset <select id="dataset"><option value="">all</option></select></label>
<label>outcome <select id="outcome"><option value="">any</option>{{range .Outcomes}}<option value="{{index . 0}}">{{index . 1}}</option>{{end}}</select></label>
<label>search <input id="q" type="search" size="30"></label>
<span id="status">The problems need JavaScript.</span>
</div>
<div id="problems"></div>
<button id="more" hidden>show more</button>
<script type="application/json" id="data">{{.Data}}</script>
<script>
(function () {
"use strict";
var data = JSON.parse(document.getElementById("data").textContent);
var page = 50, shown = page;
var ctl = {};
["run", "dataset", "outcome", "q"].forEach(function (id) { ctl[id] = document.getElementById(id); });
var outcomeLabel = {};
Array.prototype.forEach.call(ctl.outcome.options, function (o) { outcomeLabel[o.value] = o.textContent; });
var datasets = [];
data.problems.forEach(function (p) { if (datasets.indexOf(p.dataset) < 0) datasets.push(p.dataset); });
datasets.forEach(function (d) { var o = document.createElement("option"); o.textContent = d; ctl.dataset.appendChild(o); });

function el(tag, text, cls) {
  var e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function readHash() {
  var p = new URLSearchParams(location.hash.slice(1));
  Object.keys(ctl).forEach(function (k) { ctl[k].value = p.get(k) || ""; });
}
function writeHash() {
  var p = new URLSearchParams();
  Object.keys(ctl).forEach(function (k) { if (ctl[k].value) p.set(k, ctl[k].value); });
  history.replaceState(null, "", "#" + p.toString());
}
// A debate is shown when its run and one of its trajectories' outcomes match.
function debateShown(d) {
  if (ctl.run.value && data.runs[d.run] !== ctl.run.value) return false;
  return !ctl.outcome.value || d.tags.some(function (t) { return t.indexOf(ctl.outcome.value) >= 0; });
}
function haystack(p, debates) {
  var parts = [p.dataset, p.id, p.question, p.gold];
  debates.forEach(function (d) {
    d.turns.forEach(function (byAgent) { byAgent.forEach(function (rs) { rs.forEach(function (r) { parts.push(r.text, r.answer || ""); }); }); });
  });
  return parts.join("\n").toLowerCase();
}
function response(r, name) {
  var box = el("div", undefined, "resp");
  var head = el("div");
  head.appendChild(el("b", name + ": "));
  head.appendChild(el("span", r.answer === null ? "no answer" : r.answer));
  head.appendChild(document.createTextNode(" "));
  head.appendChild(el("span", r.strict ? "✓ strict" : "✗ strict", r.strict ? "ok" : "bad"));
  head.appendChild(document.createTextNode(" "));
  head.appendChild(el("span", r.robust ? "✓ robust" : "✗ robust", r.robust ? "ok" : "bad"));
  if (r.truncated) head.appendChild(el("span", " (cut at the token limit)", "muted"));
  if (r.carried) head.appendChild(el("span", " (carried from the turn before)", "muted"));
  box.appendChild(head);
  box.appendChild(el("pre", r.text));
  return box;
}
function debate(d) {
  var box = el("div", undefined, "debate");
  box.appendChild(el("h4", data.runs[d.run] + ", seed " + d.seed));
  var tb = el("table"), head = el("tr"), eu = el("tr"), au = el("tr");
  head.appendChild(el("th", "turn")); eu.appendChild(el("th", "EU")); au.appendChild(el("th", "AU"));
  d.eu.forEach(function (v, t) {
    head.appendChild(el("th", String(t)));
    eu.appendChild(el("td", v.toFixed(3)));
    au.appendChild(el("td", d.au[t].toFixed(3)));
  });
  [head, eu, au].forEach(function (r) { tb.appendChild(r); });
  box.appendChild(tb);
  d.tags.forEach(function (tags, k) {
    if (ctl.outcome.value && tags.indexOf(ctl.outcome.value) < 0) return;
    var det = el("details");
    det.open = k === 0 || !!ctl.outcome.value;
    var sum = el("summary", "trajectory " + k + " ");
    tags.forEach(function (t) { sum.appendChild(el("span", outcomeLabel[t], "tag")); });
    det.appendChild(sum);
    d.turns.forEach(function (byAgent, t) {
      det.appendChild(el("h5", "turn " + t + " (T=" + (t + 1) + ")"));
      var row = el("div", undefined, "agents");
      byAgent.forEach(function (rs, a) { row.appendChild(response(rs[k], "agent " + a)); });
      det.appendChild(row);
    });
    box.appendChild(det);
  });
  if (d.continuations) {
    var cont = el("details");
    cont.appendChild(el("summary", "continuations (what the next turn showed)"));
    d.continuations.forEach(function (byAgent, t) {
      cont.appendChild(el("h5", "turn " + t));
      var row = el("div", undefined, "agents");
      byAgent.forEach(function (r, a) { row.appendChild(response(r, "agent " + a)); });
      cont.appendChild(row);
    });
    box.appendChild(cont);
  }
  return box;
}
function render() {
  var q = ctl.q.value.toLowerCase(), list = document.getElementById("problems");
  var matches = [];
  data.problems.forEach(function (p) {
    if (ctl.dataset.value && p.dataset !== ctl.dataset.value) return;
    var ds = p.debates.filter(debateShown);
    if (ds.length === 0 || (q && haystack(p, ds).indexOf(q) < 0)) return;
    matches.push([p, ds]);
  });
  list.textContent = "";
  matches.slice(0, shown).forEach(function (m) {
    var p = m[0], box = el("section", undefined, "problem");
    box.id = "p-" + p.dataset + "-" + p.id;
    box.appendChild(el("h3", p.dataset + " · " + p.id));
    box.appendChild(el("pre", p.question));
    var gold = el("p", "gold answer: ");
    gold.appendChild(el("code", p.gold));
    box.appendChild(gold);
    m[1].forEach(function (d) { box.appendChild(debate(d)); });
    list.appendChild(box);
  });
  document.getElementById("status").textContent = matches.length + " of " + data.problems.length + " problems match" +
    (matches.length > shown ? " (showing " + shown + ")" : "");
  document.getElementById("more").hidden = matches.length <= shown;
}
function changed() { shown = page; writeHash(); render(); }
Object.keys(ctl).forEach(function (k) { ctl[k].addEventListener(k === "q" ? "input" : "change", changed); });
document.getElementById("more").addEventListener("click", function () { shown += page; render(); });
window.addEventListener("hashchange", function () { readHash(); shown = page; render(); });
readHash();
render();
})();
</script>
</body>
</html>
`))
