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

// Every chart's Plotly configuration, in one place: nothing may leave this machine, so no "Share chart" /
// "Edit in Chart Studio" button (they upload the chart to a cloud service), no link to plot.ly, no logo.
const PLOT_CONFIG = Object.freeze({
  responsive: true,
  displaylogo: false,
  showSendToCloud: false,
  showEditInChartStudio: false,
  showLink: false,
  plotlyServerURL: "",
  modeBarButtonsToRemove: ["sendChartToCloud", "editInChartStudio", "lasso2d", "select2d"],
});

// A value as people read it (the same rules as the Python side, views.shown / units.human): three significant
// figures; SI prefixes with SI units (46.6 GB, 7.49 ms); durations in min/h/days; counts as 8,192, 1.5M, 15T;
// prices with three significant figures ($2.50/h); fractions as percentages.
const SI_UNITS = new Set(["s", "B", "B/s", "FLOP", "FLOP/s", "W"]);
const SI_PREFIX = [[1e18, "E"], [1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"], [1, ""],
  [1e-3, "m"], [1e-6, "µ"], [1e-9, "n"]];
const sig3 = (x) => +x.toPrecision(3);
const grouped = (x) => x.toLocaleString("en-US",
  { maximumSignificantDigits: Math.max(3, Math.floor(Math.log10(Math.abs(x) || 1)) + 1) });

function human(v, unit = "") {
  if (typeof v !== "number" || !Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (unit === "%") return +(v * 100).toPrecision(3) + "%";
  if (unit.startsWith("$")) {
    const per = unit.slice(1);
    return (v < 0 ? "−$" : "$") + (a < 1000 ? a.toPrecision(3).replace(/\.$/, "") : human(a)) + per;
  }
  if (unit === "s" && a >= 120) {
    for (const [f, name] of [[365.25 * 86400, "years"], [86400, "days"], [3600, "h"], [60, "min"]]) {
      if (a >= 2 * f || f === 60) return `${sig3(v / f)} ${name}`;
    }
  }
  if (SI_UNITS.has(unit)) {
    if (v === 0) return `0 ${unit}`;
    const [f, p] = SI_PREFIX.find(([f]) => a >= f * 0.9995) || SI_PREFIX[SI_PREFIX.length - 1];
    return `${sig3(v / f)} ${p}${unit}`;
  }
  let s;
  if (a >= 1e15 * 0.9995) s = v.toPrecision(3).replace("e+", "e");
  else if (a >= 1e6 * 0.9995) {
    const [f, p] = [[1e12, "T"], [1e9, "B"], [1e6, "M"]].find(([f]) => a >= f * 0.9995);
    s = sig3(v / f) + p;
  } else if (Number.isInteger(v)) s = v.toLocaleString("en-US");
  else s = grouped(sig3(v));
  return unit ? `${s} ${unit}` : s;
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

const state = {};       // input name -> value (what the URL holds; a link's raw text until the server reads it)
const controls = {};    // input name -> {inp, ctl, set(value)}
let spec = null;        // the page's inputs
let seq = 0;            // request sequence: only the latest answer is drawn
let timer = null;
let renders = 0;
let firstQuery = null;  // the link's own query string, sent as it is once: the server checks every name and value

// "1 GPU", "64 sequences": a unit word is singular for exactly one (SI units and rates are not words)
const shownValue = (inp, v) => {
  if (v === 0 && inp.zero) return inp.zero;
  if (typeof v !== "number") return String(v);
  const u = inp.unit || "";
  const word = /^[A-Za-z-]+s$/.test(u) && !SI_UNITS.has(u);
  return human(v, v === 1 && word ? u.slice(0, -1) : u);
};

// A log slider moves through its stops (round numbers and powers of two: ISL 1000 and 1024 are both a key press
// away); a linear one in its step.
function buildSlider(inp, id, out) {
  const stops = inp.log ? [...inp.stops] : null;
  const ctl = el("input", { id, name: inp.name, type: "range" });
  if (stops) { ctl.min = 0; ctl.max = stops.length - 1; ctl.step = 1; }
  else { ctl.min = inp.lo; ctl.max = inp.hi; ctl.step = inp.step; }
  const valueAt = (x) => (stops ? stops[Math.round(x)] : (inp.integer ? Math.round(x) : +(+x).toPrecision(6)));
  const set = (v) => {
    const num = typeof v === "number" && Number.isFinite(v);
    if (!num) ctl.value = stops ? Math.max(0, stops.indexOf(inp.default)) : inp.default;  // text: shown as typed
    if (num) {
      if (stops) {
        if (!stops.includes(v)) {  // a value from a link that is not a stop: it becomes one
          stops.push(v); stops.sort((a, b) => a - b); ctl.max = stops.length - 1;
        }
        ctl.value = stops.indexOf(v);
      } else ctl.value = v;
    }
    const text = shownValue(inp, v);
    out.textContent = text;
    ctl.setAttribute("aria-valuetext", text);
  };
  ctl.addEventListener("input", () => {
    const nv = valueAt(Number(ctl.value));
    if (nv === state[inp.name]) return;
    state[inp.name] = nv;
    set(nv);
    changed();
  });
  return { ctl, set };
}

function buildControls() {
  const form = $("controls");
  const q = new URLSearchParams(location.search);
  for (const inp of spec.inputs) {
    const raw = q.has(inp.name) ? q.get(inp.name) : null;
    const id = "in-" + inp.name;
    const label = el("label", { for: id, text: inp.label });
    let ctl, set;
    if (inp.kind === "select") {
      ctl = el("select", { id, name: inp.name });
      for (const o of inp.options) {
        const [val, text] = Array.isArray(o) ? o : [o, o];
        ctl.append(el("option", { value: val, text }));
      }
      set = (v) => { ctl.value = v; };
      ctl.addEventListener("change", () => { state[inp.name] = ctl.value; clearInvalid(inp.name); changed(); });
    } else if (inp.kind === "check") {
      ctl = el("input", { id, name: inp.name, type: "checkbox" });
      set = (v) => { ctl.checked = v === true || v === "1" || v === "true" || v === "on"; };
      ctl.addEventListener("change", () => { state[inp.name] = ctl.checked; clearInvalid(inp.name); changed(); });
      label.prepend(ctl, " ");
    } else {
      const out = el("output", { id: "out-" + inp.name, for: id });
      label.append(out);
      ({ ctl, set } = buildSlider(inp, id, out));
      ctl.addEventListener("input", () => clearInvalid(inp.name));
    }
    if (inp.help) ctl.title = inp.help;
    controls[inp.name] = { inp, ctl, set };
    // a link's value stays as typed ("8K", or a typo) until the server has read it: never silently the default
    state[inp.name] = raw !== null ? raw : inp.default;
    set(raw !== null && inp.kind === "slider" && Number.isFinite(Number(raw)) && raw.trim() !== "" ? Number(raw)
      : state[inp.name]);
    form.append(label);
    if (inp.kind !== "check") form.append(ctl);
  }
  firstQuery = location.search.replace(/^\?/, "");
}

function query() {
  const q = new URLSearchParams();
  for (const inp of spec.inputs) {
    const v = state[inp.name];
    if (inp.kind === "check") {
      const on = v === true || v === "1" || v === "true" || v === "on";
      if (on !== inp.default) q.set(inp.name, on ? "1" : "0");
    }
    else if (String(v) !== String(inp.default)) q.set(inp.name, String(v));
  }
  return q.toString();
}

function changed() {
  firstQuery = null;  // from now on the inputs are the controls' (a link's unknown parameters were reported)
  const qs = query();
  history.replaceState(null, "", location.pathname + (qs ? "?" + qs : ""));
  document.body.dataset.busy = "1";  // until the answer to the latest inputs is drawn
  clearTimeout(timer);
  timer = setTimeout(() => { timer = null; refresh(); }, 40);
}

function clearInvalid(name) {
  const c = controls[name];
  if (c) c.ctl.removeAttribute("aria-invalid");
}

// An error leaves no stale answer on screen: the numbers, notes and derivations go, the charts are greyed and
// hidden from screen readers, and the control the message names is marked invalid.
function showFailure(msg) {
  showError(msg);
  $("numbers").replaceChildren();
  $("notes").replaceChildren();
  $("derivations").replaceChildren();
  $("derivation-head").hidden = true;
  $("results").classList.add("stale");
  $("charts").setAttribute("aria-hidden", "true");
  const field = msg.split(":")[0].trim();
  for (const [name, c] of Object.entries(controls)) {
    if (name === field) c.ctl.setAttribute("aria-invalid", "true"); else c.ctl.removeAttribute("aria-invalid");
  }
  document.body.dataset.failures = String(Number(document.body.dataset.failures || 0) + 1);
}

async function refresh() {
  const mine = ++seq;
  const qs = firstQuery !== null ? firstQuery : query();
  try {
    const v = await getJSON(`/api/view/${spec.id}${qs ? "?" + qs : ""}`);
    if (mine !== seq) return;
    showError("");
    if (firstQuery !== null && v.inputs) {  // the link's values as the server read them ("8K" → 8,000)
      for (const [name, val] of Object.entries(v.inputs)) {
        if (controls[name] && String(state[name]) !== String(val)) { state[name] = val; controls[name].set(val); }
      }
      firstQuery = null;
    }
    render(v);
  } catch (e) {
    if (mine === seq) showFailure(e.message);
  }
  if (mine === seq && timer === null) document.body.dataset.busy = "0";  // nothing newer asked for or pending
}

function render(v) {
  $("results").classList.remove("stale");
  $("charts").removeAttribute("aria-hidden");
  $("header").textContent = v.header || "";
  const nums = $("numbers");
  nums.replaceChildren(...v.numbers.map((n) => el("div", { class: "number", "data-key": n.key, role: "group",
    "aria-label": n.label },
    el("div", { class: "k", text: n.label }), el("div", { class: "v", text: n.shown }))));
  const charts = $("charts");
  const boxes = v.charts.map((c) => {  // lay every chart box out first, then draw (each at its final width)
    let fig = document.getElementById("figure-" + c.id);
    if (!fig) {
      fig = el("figure", { id: "figure-" + c.id, class: "figure" },
        el("div", { id: "chart-" + c.id, class: "chart", role: "img", "aria-describedby": "summary-" + c.id }),
        el("figcaption", { id: "summary-" + c.id, class: "summary" }));
      charts.append(fig);
    }
    return fig;
  });
  v.charts.forEach((c, i) => {
    const div = boxes[i].querySelector(".chart");
    const layout = Object.assign({ paper_bgcolor: "#fff", plot_bgcolor: "#fff", font: { size: 12 } }, c.layout);
    layout.title = Object.assign({ font: { size: 13 }, x: 0.02, xanchor: "left" }, c.layout.title || {});
    div.setAttribute("aria-label", (c.layout.title && c.layout.title.text) || c.id);
    boxes[i].querySelector(".summary").textContent = c.summary || "";
    Plotly.react(div, c.data, layout, PLOT_CONFIG);
  });
  for (const fig of [...charts.children]) {
    if (!v.charts.some((c) => "figure-" + c.id === fig.id)) { Plotly.purge(fig.querySelector(".chart")); fig.remove(); }
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
