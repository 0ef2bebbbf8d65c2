// berth dashboard: polls /api/state and renders it. Everything shown comes
// from the cluster, so it is written with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const money = (v) => "$" + (v || 0).toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 3);
const badge = (text, cls) => el("span", { class: "badge " + (cls || text) }, text);

function table(headers, rows, empty) {
  if (!rows.length) return el("p", { class: "empty" }, empty);
  return el("table", {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { class: h.num ? "num" : "" }, h.label || h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c, i) => el("td", { class: headers[i].num ? "num" : "" }, c))))));
}

function card(value, label) {
  return el("div", { class: "card" }, el("div", { class: "value" }, value), el("div", { class: "label" }, label));
}

function renderTotals(t) {
  $("totals").replaceChildren(
    card(t.readyNodes + " / " + t.nodes, "nodes ready / total"),
    card(String(t.pending), "pending pods"),
    card(money(t.pricePerHour) + "/h", "cost of berth's nodes"),
    card(t.headroomReady + " / " + t.headroomDesired, "headroom units ready / desired"));
}

// chart draws series (each {label, color, values}) over the samples' times.
function chart(title, history, series, format) {
  const w = 300, h = 100, pad = 4;
  const times = history.map((s) => Date.parse(s.time));
  const t0 = Math.min(...times, Date.now() - 3600e3), t1 = Math.max(...times, t0 + 1);
  let top = 1;
  for (const s of series) for (const v of s.values) top = Math.max(top, v);
  const x = (t) => pad + (w - 2 * pad) * (t - t0) / (t1 - t0);
  const y = (v) => h - pad - (h - 2 * pad) * v / top;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("preserveAspectRatio", "none");
  for (const s of series) {
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", s.color);
    line.setAttribute("stroke-width", "2");
    line.setAttribute("vector-effect", "non-scaling-stroke");
    line.setAttribute("points", s.values.map((v, i) => `${x(times[i]).toFixed(1)},${y(v).toFixed(1)}`).join(" "));
    svg.append(line);
  }
  const last = series.map((s) => format(s.values.length ? s.values[s.values.length - 1] : 0)).join(" / ");
  return el("div", { class: "chart", "data-chart": title },
    el("h3", {}, title, el("span", { class: "now" }, last)), svg,
    el("div", { class: "legend" }, series.map((s) => el("span", {}, "— ", s.label, "  ")), "max " + format(top)));
}

function renderCharts(history) {
  const pick = (f) => history.map(f);
  const int = (v) => String(Math.round(v));
  $("charts").replaceChildren(
    chart("Nodes", history, [{ label: "total", color: "#2b6cb0", values: pick((s) => s.nodes) },
      { label: "ready", color: "#1f8a4c", values: pick((s) => s.readyNodes) }], int),
    chart("Pending pods", history, [{ label: "pending", color: "#c53030", values: pick((s) => s.pending) }], int),
    chart("Cost per hour", history, [{ label: "$/h", color: "#6b46c1", values: pick((s) => s.pricePerHour) }], money),
    chart("Headroom units", history, [{ label: "desired", color: "#b7791f", values: pick((s) => s.headroomDesired) },
      { label: "ready", color: "#1f8a4c", values: pick((s) => s.headroomReady) }], int));
}

function renderGroups(groups) {
  if (!groups.length) { $("nodegroups").replaceChildren(el("p", { class: "empty" }, "No NodeGroups.")); return; }
  $("nodegroups").replaceChildren(...groups.map((g) => {
    const fill = g.maxSize ? Math.min(100, 100 * g.nodes / g.maxSize) : 0;
    const level = el("span");
    level.style.width = fill + "%"; // a style property: the page's CSP forbids style attributes
    const bar = el("span", { class: "bar", title: `${g.nodes} of max ${g.maxSize}` }, level);
    const conds = (g.conditions || []).map((c) => el("div", {}, badge(c.type, "warn"), " ", c.message));
    const nodes = table(["node", "type", "zone", "capacity", "ready", { label: "$/h", num: true }, "age", "berth"],
      g.nodeList.map((n) => [n.name, n.instanceType, n.zone, n.capacityType, n.ready ? badge("Ready", "ok") : badge("NotReady", "warn"),
        money(n.pricePerHour), n.age, n.state || ""]), "No nodes.");
    return el("div", { class: "group", "data-nodegroup": g.name },
      el("div", { class: "group-head" }, el("h3", {}, g.name), el("span", { class: "muted" }, g.provider),
        el("span", {}, `${g.readyNodes}/${g.nodes} ready `, bar, ` min ${g.minSize} max ${g.maxSize}`),
        el("span", {}, money(g.pricePerHour) + "/h")),
      conds,
      table(["instance type", "zone", "capacity type", { label: "nodes", num: true }, { label: "$/h each", num: true }],
        g.offerings.map((o) => [o.instanceType, o.zone, o.capacityType, String(o.nodes), money(o.pricePerHour)]), "No nodes."),
      el("details", {}, el("summary", {}, g.nodes === 1 ? "1 node" : `${g.nodes} nodes`), nodes));
  }));
}

function render(s) {
  renderTotals(s.totals);
  renderCharts(s.history || []);
  renderGroups(s.nodeGroups || []);
  $("headrooms").replaceChildren(table(["headroom", { label: "desired", num: true }, { label: "ready", num: true }, "unit", "placeholders", "schedule", "per-node reserve", ""],
    (s.headrooms || []).map((h) => [h.name, String(h.desired), String(h.ready), h.unit || "", h.placeholders ? "yes" : "no", h.schedule || "",
      h.reserve ? `${h.reserve} on ${h.reservedNodes} nodes` : "", h.ready < h.desired ? badge("not ready", "warn") : badge("ready", "ok")]), "No Headrooms."));
  $("pending").replaceChildren(table(["pod", "age", "berth", "node", "why"],
    (s.pending || []).map((p) => [p.namespace + "/" + p.name, p.age, badge(p.action), p.node || "", p.message]),
    "No pod is waiting for a node."));
  $("disruptions").replaceChildren(table(["node", "node group", "", "reason", "since", "why"],
    (s.disruptions || []).map((d) => [d.node, d.nodeGroup, d.active ? badge("disrupting", "active") : badge("kept", "kept"), d.reason, d.since, d.message]),
    "No node is being drained, replaced or kept by a rule."));
  $("decisions").replaceChildren(table(["time", "", "reason", "object", "message"],
    (s.decisions || []).map((d) => [new Date(d.time).toLocaleTimeString(), badge(d.type), d.reason, d.object, d.message]),
    "No events from berth yet."));
  const problems = $("problems");
  problems.hidden = !(s.problems && s.problems.length);
  problems.textContent = (s.problems || []).join("\n");
  $("status").textContent = "updated " + new Date(s.time).toLocaleTimeString();
}

async function poll() {
  let wait = 5;
  try {
    const r = await fetch("api/state", { cache: "no-store" });
    if (!r.ok) throw new Error(r.status + " " + r.statusText);
    const s = await r.json();
    wait = s.intervalSeconds || wait;
    if (s.time && !s.time.startsWith("0001")) render(s);
    else $("status").textContent = "reading the cluster…";
  } catch (e) {
    $("status").textContent = "cannot reach berth dashboard: " + e.message;
  }
  setTimeout(poll, wait * 1000);
}

poll();
