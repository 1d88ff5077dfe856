// rackmath web: one generic script for every page.
// A page's inputs come from /api/pages/<id>; each change asks /api/view/<id>?<inputs> for the numbers, the Plotly
// figures and the derivations, and writes the inputs into the address bar (a link reproduces the view).
"use strict";

const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const kid of kids) e.append(kid);
  return e;
};

// A value as people write it: 65,536; 1.5; 15T.
function human(v) {
  if (typeof v !== "number") return String(v);
  const a = Math.abs(v);
  if (a >= 1e7) {
    for (const [s, f] of [["T", 1e12], ["B", 1e9], ["M", 1e6]]) {
      if (a >= f) return +(v / f).toPrecision(3) + s;
    }
  }
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  return +v.toPrecision(3) + "";
}

function showError(msg) {
  const e = $("error");
  if (!e) return;
  e.hidden = !msg;
  e.textContent = msg || "";
}

async function getJSON(url) {
  const r = await fetch(url);
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

// ------------------------------------------------------------------ index page

async function indexPage() {
  try {
    const pages = await getJSON("/api/pages");
    for (const p of pages) {
      $("pages").append(el("li", {}, el("span", { class: "when", text: p.chapter || "·" }),
        el("a", { href: "/p/" + p.id, text: p.title }), " — " + p.blurb));
    }
  } catch (e) { showError(e.message); }
}

// ------------------------------------------------------------------ a chapter page

const state = {};       // input name -> value (what the URL holds)
let spec = null;        // the page's inputs
let seq = 0;            // request sequence: only the latest answer is drawn
let timer = null;
let renders = 0;

// Log sliders move in powers of 2; one whose range starts at 0 ("the default") keeps 0 one notch below 1.
function sliderPos(inp, v) {
  if (!inp.log) return v;
  if (inp.lo === 0 && v <= 0) return -1;
  return Math.log2(Math.max(v, inp.lo || 1));
}
function sliderVal(inp, x) {
  if (inp.log && inp.lo === 0 && x < 0) return 0;
  let v = inp.log ? Math.pow(2, x) : x;
  v = Math.min(inp.hi, Math.max(inp.lo, v));
  return inp.integer ? Math.round(v) : +v.toPrecision(4);
}

function buildControls() {
  const form = $("controls");
  const q = new URLSearchParams(location.search);
  for (const inp of spec.inputs) {
    let v = q.has(inp.name) ? q.get(inp.name) : inp.default;
    const id = "in-" + inp.name;
    const label = el("label", { for: id, text: inp.label });
    let ctl;
    if (inp.kind === "select") {
      ctl = el("select", { id, name: inp.name });
      for (const o of inp.options) {
        const [val, text] = Array.isArray(o) ? o : [o, o];
        ctl.append(el("option", { value: val, text }));
      }
      ctl.value = v;
      state[inp.name] = v;
      ctl.addEventListener("change", () => { state[inp.name] = ctl.value; changed(); });
    } else if (inp.kind === "check") {
      v = v === true || v === "1" || v === "true" || v === "on";
      ctl = el("input", { id, name: inp.name, type: "checkbox" });
      ctl.checked = v;
      state[inp.name] = v;
      ctl.addEventListener("change", () => { state[inp.name] = ctl.checked; changed(); });
      label.prepend(ctl, " ");
      form.append(label);
      continue;
    } else {
      v = Number(v);
      if (!Number.isFinite(v)) v = inp.default;
      const shown = (x) => (x === 0 && inp.zero ? inp.zero : human(x));
      const out = el("output", { id: "out-" + inp.name, for: id, text: shown(v) });
      label.append(out);
      const step = inp.log ? 0.125 : inp.step;
      ctl = el("input", { id, name: inp.name, type: "range", min: sliderPos(inp, inp.lo), max: sliderPos(inp, inp.hi),
        step });
      ctl.value = sliderPos(inp, v);
      state[inp.name] = v;
      ctl.addEventListener("input", () => {
        const nv = sliderVal(inp, Number(ctl.value));
        if (nv === state[inp.name]) return;
        state[inp.name] = nv;
        out.textContent = shown(nv);
        changed();
      });
    }
    form.append(label, ctl);
  }
}

function query() {
  const q = new URLSearchParams();
  for (const inp of spec.inputs) {
    const v = state[inp.name];
    if (inp.kind === "check") { if (v !== inp.default) q.set(inp.name, v ? "1" : "0"); }
    else if (String(v) !== String(inp.default)) q.set(inp.name, String(v));
  }
  return q.toString();
}

function changed() {
  const qs = query();
  history.replaceState(null, "", location.pathname + (qs ? "?" + qs : ""));
  document.body.dataset.busy = "1";  // until the answer to the latest inputs is drawn
  clearTimeout(timer);
  timer = setTimeout(() => { timer = null; refresh(); }, 40);
}

async function refresh() {
  const mine = ++seq;
  const qs = query();
  try {
    const v = await getJSON(`/api/view/${spec.id}${qs ? "?" + qs : ""}`);
    if (mine !== seq) return;
    showError("");
    render(v);
  } catch (e) {
    if (mine === seq) showError(e.message);
  }
  if (mine === seq && timer === null) document.body.dataset.busy = "0";  // nothing newer asked for or pending
}

function render(v) {
  $("header").textContent = v.header || "";
  const nums = $("numbers");
  nums.replaceChildren(...v.numbers.map((n) => el("div", { class: "number", "data-key": n.key },
    el("div", { class: "k", text: n.label }), el("div", { class: "v", text: n.shown }))));
  const charts = $("charts");
  const divs = v.charts.map((c) => {  // lay every chart box out first, then draw (each at its final width)
    let div = document.getElementById("chart-" + c.id);
    if (!div) { div = el("div", { id: "chart-" + c.id, class: "chart" }); charts.append(div); }
    return div;
  });
  v.charts.forEach((c, i) => {
    const layout = Object.assign({ paper_bgcolor: "#fff", plot_bgcolor: "#fff", font: { size: 12 } }, c.layout);
    layout.title = Object.assign({ font: { size: 13 }, x: 0.02, xanchor: "left" }, c.layout.title || {});
    Plotly.react(divs[i], c.data, layout, { responsive: true, displaylogo: false });
  });
  for (const div of [...charts.children]) {
    if (!v.charts.some((c) => "chart-" + c.id === div.id)) { Plotly.purge(div); div.remove(); }
  }
  $("notes").replaceChildren(...(v.notes || []).map((n) => el("li", { text: n })));
  $("derivations").replaceChildren(...v.derivations.map(derivationBox));
  $("derivation-head").hidden = v.derivations.length === 0;
  renders += 1;
  document.body.dataset.renders = String(renders);
}

function derivationBox(d) {
  const rows = d.steps.map((s) => {
    const sub = s.substituted && s.substituted !== s.formula ? "= " + s.substituted : "";
    return el("tr", {}, el("td", { class: "sym", text: s.symbol }), el("td", { text: "= " + s.formula }),
      el("td", { text: sub }), el("td", { class: "val", text: "= " + s.shown }),
      el("td", { class: "note", text: s.note ? "[" + s.note + "]" : "" }));
  });
  const box = el("div", { class: "derivation" }, el("h3", { text: d.title }), el("table", {}, el("tbody", {}, ...rows)));
  if (d.conclusion) box.append(el("p", { class: "conclusion", text: d.conclusion }));
  return box;
}

async function chapterPage(id) {
  try {
    spec = await getJSON("/api/pages/" + encodeURIComponent(id));
    const all = await getJSON("/api/pages");
    document.title = "rackmath — " + spec.title;
    $("title").textContent = (spec.chapter ? spec.chapter + " · " : "") + spec.title;
    $("cli").textContent = spec.cli;
    $("nav").replaceChildren(...all.map((p) => el("a", { href: "/p/" + p.id, class: p.id === id ? "current" : "",
      title: p.title, text: p.id })), el("a", { href: "/docs", text: "API" }));
    $("reset").addEventListener("click", (e) => { e.preventDefault(); location.href = location.pathname; });
    buildControls();
    await refresh();
  } catch (e) { showError(e.message); }
}

const parts = location.pathname.split("/").filter(Boolean);
if (parts[0] === "p" && parts[1]) chapterPage(parts[1]); else indexPage();
