// The "Advisor" tab of the web page: a model and cluster (JSON, as `ppsched advise` reads
// from YAML) posted to /v1/advise, the ranked strategies shown as a table. Self-contained:
// it adds its own tab bar and section, so index.html only loads this script.
"use strict";

(function () {
  const EXAMPLE = {
    name: "llama-h4096-s16k",
    model: { layers: 32, hidden: 4096, heads: 32, seq_len: 16384, microbatch_size: 4,
             vocab: 32000 },
    cluster: { num_gpus: 16, gpus_per_node: 8, gpu_tflops: 312, mfu: 0.5, gpu_memory_gb: 80,
               intra_node_gbps: 200, inter_node_gbps: 1.25, latency_us: 10 },
    num_microbatches: 64,
    recompute: ["1f1b", "fsdp", "weipipe-naive", "weipipe-interleave", "weipipe-zb1",
                "weipipe-zb2"],
  };

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function fmt(x, digits) {
    return x === null || x === undefined ? "-" : Number(x).toFixed(digits);
  }

  function build() {
    const main = document.querySelector("main");
    // The same frame as the Schedules tab's <main> (style.css): a card for the form, a
    // card for the ranking, the error between them.
    const section = el("section", { id: "advise", class: "advise", hidden: "" });
    const form = el("div", { class: "card advise-form" });
    form.append(
      el("h2", {}, "Advisor: which strategy for this model and cluster"),
      el("label", { for: "advise-config" }, "Model and cluster (JSON; the fields of ppsched advise MODEL.yaml)"));
    const text = el("textarea", { id: "advise-config", rows: "16", spellcheck: "false" });
    text.value = JSON.stringify(EXAMPLE, null, 2);
    const button = el("button", { type: "submit", id: "advise-run" }, "Advise");
    form.append(text, button);
    const error = el("div", { id: "advise-error", class: "error", role: "alert", hidden: "" });
    const result = el("div", { id: "advise-result", class: "card", "aria-live": "polite" });
    section.append(form, error, result);

    // Tabs: the existing page and the advisor, one visible at a time.
    const bar = el("nav", { id: "tabs", class: "tabs" });
    const tabSchedules = el("button", { type: "button", id: "tab-schedules",
                                        "aria-selected": "true" }, "Schedules");
    const tabAdvise = el("button", { type: "button", id: "tab-advise",
                                     "aria-selected": "false" }, "Advisor");
    bar.append(tabSchedules, tabAdvise);
    function show(advisor) {
      if (main) main.hidden = advisor;
      section.hidden = !advisor;
      tabSchedules.setAttribute("aria-selected", String(!advisor));
      tabAdvise.setAttribute("aria-selected", String(advisor));
    }
    tabSchedules.addEventListener("click", () => show(false));
    tabAdvise.addEventListener("click", () => show(true));
    const anchor = main || document.body.lastElementChild;
    anchor.before(bar);
    anchor.after(section);

    button.addEventListener("click", () => run(text, error, result));
  }

  async function run(text, error, result) {
    error.hidden = true;
    result.setAttribute("data-state", "running");
    let config;
    try {
      config = JSON.parse(text.value);
    } catch (exc) {
      fail(error, result, "config: not valid JSON (" + exc.message + ")");
      return;
    }
    let response, body;
    try {
      response = await fetch("/v1/advise", {
        method: "POST", headers: { "content-type": "application/json",
                   ...(typeof authHeaders === "function" ? authHeaders() : {}) },
        body: JSON.stringify(config) });
      body = await response.json();
    } catch (exc) {
      fail(error, result, "the service did not answer: " + exc.message);
      return;
    }
    if (!response.ok) {
      fail(error, result, body.message || ("HTTP " + response.status));
      return;
    }
    render(result, body.ranked, body.assumptions || []);
  }

  function fail(error, result, message) {
    error.textContent = message;
    error.hidden = false;
    result.replaceChildren();
    result.setAttribute("data-state", "error");
  }

  function render(result, ranked, assumptions) {
    const table = el("table", { class: "advise-table" });
    const head = el("tr");
    for (const h of ["#", "strategy", "step s", "tokens/s/GPU", "peak GB", "fits",
                     "bubble", "comm GB/GPU", "note"]) head.append(el("th", {}, h));
    table.append(head);
    ranked.forEach((c, i) => {
      const row = el("tr", { "data-strategy": c.strategy,
                             "data-fits": String(c.fits) });
      const cells = [c.step_time_s === null ? "-" : String(i + 1), c.strategy,
                     fmt(c.step_time_s, 3), fmt(c.tokens_per_s_per_gpu, 1),
                     fmt(c.peak_memory_gb, 1), c.fits ? "yes" : "no",
                     fmt(c.bubble_rate, 3), fmt(c.comm_gb_per_gpu, 2), c.note];
      for (const x of cells) row.append(el("td", {}, x));
      table.append(row);
    });
    // The values the answer rests on, and where each came from (the body or a default):
    // set any of them in the JSON to see whether the pick holds.
    const facts = el("table", { class: "advise-table advise-assumptions" });
    const factsHead = el("tr");
    for (const h of ["assumption", "value", "from"]) factsHead.append(el("th", {}, h));
    facts.append(factsHead);
    for (const a of assumptions) {
      const row = el("tr", { "data-assumption": a.field, title: a.description });
      const value = Array.isArray(a.value) ? (a.value.join(", ") || "none") : String(a.value);
      for (const x of [a.field, value, a.source]) row.append(el("td", {}, x));
      facts.append(row);
    }
    result.replaceChildren(table, el("h3", {}, "Assumptions"), facts);
    result.setAttribute("data-state", "done");
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", build);
  } else {
    build();
  }
})();
