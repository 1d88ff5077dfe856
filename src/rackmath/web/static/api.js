// The API reference, rendered offline from /openapi.json (FastAPI's own /docs page loads Swagger UI from a CDN).
"use strict";
(async () => {
  const el = (tag, attrs = {}, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) { if (k === "text") e.textContent = v; else e.setAttribute(k, v); }
    e.append(...kids);
    return e;
  };
  try {
    const spec = await (await fetch("/openapi.json")).json();
    const ops = document.getElementById("ops");
    for (const [path, methods] of Object.entries(spec.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        const params = op.parameters || [];
        const rows = params.map((p) => {
          const sch = p.schema || {};
          const type = sch.type || (sch.anyOf || []).map((s) => s.type).filter((t) => t !== "null").join(" | ");
          const dflt = sch.default === undefined ? "" : JSON.stringify(sch.default);
          return el("tr", {}, el("td", {}, el("code", { text: p.name })), el("td", { text: p.in }),
            el("td", { text: (p.required ? "required " : "") + (type || "") }), el("td", { text: dflt }),
            el("td", { text: p.description || sch.description || "" }));
        });
        const box = el("section", { class: "op", id: op.operationId || path },
          el("h3", {}, el("code", { text: method.toUpperCase() + " " + path }), " — " + (op.summary || "")),
          op.description ? el("p", { text: op.description }) : "",
          (op.tags || []).length ? el("p", { class: "hint", text: "tags: " + op.tags.join(", ") }) : "");
        if (rows.length) {
          box.append(el("table", {}, el("thead", {}, el("tr", {}, ...["parameter", "in", "type", "default",
            "description"].map((h) => el("th", { text: h })))), el("tbody", {}, ...rows)));
        }
        ops.append(box);
      }
    }
  } catch (e) {
    const err = document.getElementById("error");
    err.hidden = false;
    err.textContent = String(e);
  }
})();
