// The ppsched page: load the methods and the paper's example profiles, post one or two
// solves, poll long (ILP) jobs (with Cancel), draw each schedule's Gantt chart (gantt.js;
// compared charts share one time scale) with its headline figures and download links.
// Plain DOM, no build step; talks only to /v1.
"use strict";

const POLL_MS = 400;
const DEFAULT_EXAMPLE = "gpt1.5b-p8-m24";

const $ = (id) => document.getElementById(id);
let examples = [];
let running = 0; // a counter so a second submit while one runs is refused, not doubled
const errors = new Map(); // message -> the methods it came from, so each shows once

// HTTP.

class ApiError extends Error {
  constructor(body, status) {
    // The service's errors carry `message` (and field, value, accepted); anything else
    // (a proxy's page, a framework default) is shown as it came.
    const detail = body && (body.message || body.detail);
    super(!detail ? `HTTP ${status}` : typeof detail === "string" ? detail : JSON.stringify(detail));
    this.body = body;
    this.status = status;
  }
}

// The API key, if this service asks for one: kept for the tab (sessionStorage), sent as
// `Authorization: Bearer KEY` with every call (advise.js and the downloads use it too).
const KEY_STORE = "ppsched-api-key";

function authHeaders() {
  const field = $("api-key");
  const key = field ? field.value.trim() : "";
  return key ? { Authorization: `Bearer ${key}` } : {};
}

async function api(path, options = {}) {
  const headers = { ...(options.headers || {}), ...authHeaders() };
  const response = await fetch(path, { ...options, headers });
  const type = response.headers.get("content-type") || "";
  const body = type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) {
    throw new ApiError(typeof body === "object" ? body : { message: body }, response.status);
  }
  return { status: response.status, body };
}

// Formatting.

const num = (x, digits = 4) =>
  typeof x === "number" && Number.isFinite(x) ? String(+x.toFixed(digits)) : "n/a";
const wall = (s) =>
  typeof s !== "number" ? "n/a" : s < 1 ? `${(1000 * s).toFixed(1)} ms` : `${s.toFixed(2)} s`;
const pct = (x) => (typeof x === "number" && Number.isFinite(x) ? `${(100 * x).toFixed(2)}%` : "n/a");

// Setup.

function setupKey() {
  const field = $("api-key");
  field.value = sessionStorage.getItem(KEY_STORE) || "";
  field.addEventListener("change", () => {
    sessionStorage.setItem(KEY_STORE, field.value.trim());
    // A key typed after a 401: load what the page could not load without one.
    if (!examples.length) {
      hideError();
      loadCatalog();
    }
  });
  // With a key, a download link cannot carry it: fetch the file and save it instead.
  document.addEventListener("click", async (event) => {
    const a = event.target.closest && event.target.closest("a[data-download]");
    if (!a || !authHeaders().Authorization) return;
    event.preventDefault();
    try {
      const response = await fetch(a.getAttribute("href"), { headers: authHeaders() });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const url = URL.createObjectURL(await response.blob());
      const save = document.createElement("a");
      save.href = url;
      save.download = a.download;
      save.click();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (err) {
      showError(`download failed: ${err.message}`);
    }
  });
}

async function init() {
  setupKey();
  $("solve-form").addEventListener("submit", onSubmit);
  $("load-example").addEventListener("click", () => loadExample($("example").value));
  $("method-a").addEventListener("change", showMethodHelp);
  $("memory-limit").addEventListener("change", reflectMemoryLimit);
  await loadCatalog();
}

// The methods and the example profiles (again once a key is given, after a 401).
async function loadCatalog() {
  try {
    const [m, e] = await Promise.all([api("/v1/methods"), api("/v1/examples")]);
    // Loaded again after a 401: the lists filled once, never twice ("(none)" stays).
    for (const id of ["method-a", "method-b", "example"]) {
      for (const option of [...$(id).options]) if (option.value) option.remove();
    }
    fillMethods(m.body.methods);
    examples = e.body.examples;
    for (const example of examples) $("example").append(new Option(example.name, example.name));
    const first = examples.find((x) => x.name === DEFAULT_EXAMPLE) || examples[0];
    if (first) {
      $("example").value = first.name;
      loadExample(first.name);
    }
    document.body.dataset.ready = "true";
  } catch (err) {
    showError(`could not load the methods and examples: ${err.message}`);
  }
}

function fillMethods(methods) {
  const descriptions = {};
  for (const { name, description } of methods) {
    descriptions[name] = description;
    $("method-a").append(new Option(name, name));
    $("method-b").append(new Option(name, name));
  }
  $("method-a").dataset.descriptions = JSON.stringify(descriptions);
  if (descriptions.heuristic !== undefined) $("method-a").value = "heuristic";
  showMethodHelp();
}

function showMethodHelp() {
  const descriptions = JSON.parse($("method-a").dataset.descriptions || "{}");
  $("method-help").textContent = descriptions[$("method-a").value] || "";
}

function loadExample(name) {
  const example = examples.find((x) => x.name === name);
  if (example) $("profile").value = JSON.stringify(example.profile, null, 2);
}

// Solving.

function readProfile() {
  let profile;
  try {
    profile = JSON.parse($("profile").value);
  } catch (err) {
    throw new Error(`profile: not valid JSON (${err.message})`);
  }
  if (profile === null || typeof profile !== "object" || Array.isArray(profile)) {
    throw new Error("profile: expected a JSON object with the fields of DESIGN.md section 2");
  }
  const limit = $("memory-limit").value.trim();
  if (limit !== "") {
    if (["none", "null"].includes(limit.toLowerCase())) profile.memory_limit = null;
    else if (Number.isFinite(Number(limit))) profile.memory_limit = Number(limit);
    else throw new Error(`memory limit: got '${limit}'; expected a number or 'none'`);
    // The override is written into the profile text, so what is shown is what is solved.
    $("profile").value = JSON.stringify(profile, null, 2);
  }
  return profile;
}

function reflectMemoryLimit() {
  try {
    readProfile();
  } catch (err) {
    // A profile that is not JSON yet, or a bad limit: the submit says which.
  }
}

async function onSubmit(event) {
  event.preventDefault();
  if (running) return;
  hideError();
  let profile;
  try {
    profile = readProfile();
  } catch (err) {
    showError(err.message);
    return;
  }
  const methods = [$("method-a").value, $("method-b").value].filter(Boolean);
  const panels = [$("result-a"), $("result-b")];
  panels[1].hidden = methods.length < 2;
  $("comparison").hidden = true;
  $("results").dataset.state = "solving";
  running += 1;
  $("solve").disabled = true;
  try {
    const schedules = await Promise.all(
      methods.map((method, i) => solveInto(panels[i], profile, method)),
    );
    if (schedules.length === 2 && schedules.every(Boolean)) showComparison(...schedules);
    drawCharts(panels, schedules); // last: it marks the panels done
  } finally {
    running -= 1;
    $("solve").disabled = false;
    $("results").dataset.state = "done";
  }
}

async function solveInto(panel, profile, method) {
  resetPanel(panel, method);
  const request = {
    profile,
    method,
    objective: $("objective").value,
    time_limit_s: Number($("time-limit").value) || 10,
  };
  try {
    let { status, body } = await api("/v1/schedules", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(request),
    });
    let note = "";
    if (status === 202) ({ schedule: body, note } = await waitForJob(panel, body));
    showSchedule(panel, method, body, note);
    return body;
  } catch (err) {
    // The message itself shows once, in the error box above the results. The state is
    // set last: whoever waits on it sees the message already there.
    panel.querySelector(".status").textContent = `${method}: failed (the message is above)`;
    showError(err.message, method);
    panel.dataset.state = "error";
    return null;
  }
}

// Poll a job until it ends; a Cancel button stops it (DELETE /v1/jobs/{id}). A cancelled
// ilp search keeps its best schedule so far, which is shown as such.
async function waitForJob(panel, accepted) {
  const status = panel.querySelector(".status");
  const cancel = panel.querySelector(".cancel");
  cancel.hidden = false;
  cancel.disabled = false;
  cancel.onclick = async () => {
    cancel.disabled = true;
    status.textContent = "cancelling...";
    panel.dataset.state = "cancelling";
    try {
      await api(accepted.links.self, { method: "DELETE" });
    } catch (err) {
      showError(`cancel: ${err.message}`);
    }
  };
  try {
    for (;;) {
      const { body: job } = await api(accepted.links.self);
      if (job.status === "done" || (job.status === "cancelled" && job.schedule_id)) {
        const schedule = (await api(`/v1/schedules/${job.schedule_id}`)).body;
        const note = job.status === "cancelled" ? "cancelled: the best schedule found so far" : "";
        return { schedule, note };
      }
      if (job.status === "failed" || job.status === "cancelled") {
        const reason = job.error && typeof job.error === "object" ? job.error.message : job.error;
        throw new Error(`job ${job.status}${reason ? `: ${reason}` : ""}`);
      }
      const p = job.progress;
      if (!cancel.disabled) {
        status.textContent = p
          ? `${job.status}: ${num(p.elapsed_s, 1)} s, best ${num(p.best)}, bound ${num(p.bound)}, gap ${pct(p.gap)}`
          : `${job.status}...`;
        panel.dataset.state = job.status; // queued or running
        if (p) panel.dataset.progress = "true"; // the search has a schedule to keep
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  } finally {
    cancel.hidden = true;
    cancel.onclick = null;
  }
}

// Showing.

function resetPanel(panel, method) {
  panel.replaceChildren($("panel-template").content.cloneNode(true));
  panel.querySelector(".title").textContent = method;
  panel.querySelector(".status").textContent = "solving...";
  panel.dataset.state = "solving";
  delete panel.dataset.progress;
  delete panel.dataset.result;
  panel.hidden = false;
}

function showSchedule(panel, requested, schedule, note) {
  const m = schedule.metrics;
  const s = schedule.solver || {};
  const label = schedule.method && schedule.method !== requested
    ? `${requested} (${schedule.method})` : requested;
  panel.querySelector(".title").textContent = label;
  const figures = {
    cost: num(m.cost),
    bubble_rate: pct(m.bubble_rate),
    peak_memory: m.peak_memory.map((x) => num(x, 3)).join(" "),
    gap: pct(s.gap),
    makespan: num(m.makespan),
    lower_bound: num(m.lower_bound),
    solver: `${s.status || "?"}, ${wall(s.wall_s)}`,
  };
  for (const [key, text] of Object.entries(figures)) {
    panel.querySelector(`[data-figure="${key}"]`).textContent = text;
  }
  const links = { json: schedule.links.self, csv: schedule.links.csv,
                  trace: schedule.links.trace, svg: schedule.links.svg };
  const base = `${schedule.profile.name || "schedule"}-${requested}`;
  const extension = { json: "json", csv: "csv", trace: "trace.json", svg: "svg" };
  for (const [key, href] of Object.entries(links)) {
    const a = panel.querySelector(`[data-download="${key}"]`);
    a.href = href;
    a.download = `${base}.${extension[key]}`;
  }
  panel.querySelector(".downloads").hidden = false; // links only once the result exists
  panel.querySelector(".status").textContent =
    note ? `${note} (schedule ${schedule.id})` : `schedule ${schedule.id}`;
  panel.dataset.result = note ? "cancelled" : "complete";
  // Drawn at once on its own scale; drawCharts redraws on the shared one when all are in.
  drawChart(panel, schedule, chartWidth(panel, [schedule]), endOf(schedule));
  panel.dataset.state = "drawn";
}

const MAX_CHART_PX = 16000; // wider charts would leave some labels out instead
// Loops, not Math.max(...list): a schedule may have 10^5 ops, past the argument limit.
const endOf = (schedule) => schedule.ranks.flat().reduce((t, op) => Math.max(t, op.end), 1e-9);

// The panel's width, or wider (the chart then scrolls sideways) so that the shortest op
// still holds its microbatch number at 8 px: labels >= 10 stay readable.
function chartWidth(panel, schedules) {
  let shortest = Infinity;
  let largest = 0;
  for (const op of schedules.flatMap((s) => s.ranks.flat())) {
    if (op.end > op.start) shortest = Math.min(shortest, op.end - op.start);
    largest = Math.max(largest, op.microbatch);
  }
  const digits = String(largest).length;
  const timeMax = Math.max(...schedules.map(endOf));
  const fit = Math.max(600, panel.querySelector(".chart").clientWidth || $("results").clientWidth);
  const margins = GANTT.left + GANTT.right;
  const needed = Number.isFinite(shortest)
    ? margins + Math.ceil((timeMax * (digits * 4.9 + 2.5)) / shortest) : fit;
  return Math.min(MAX_CHART_PX, Math.max(fit, needed));
}

function drawChart(panel, schedule, width, timeMax) {
  panel.querySelector(".chart").replaceChildren(drawGantt(schedule, width, timeMax));
}

// Every chart of this submit on one time scale (the latest end among them) and one width.
function drawCharts(panels, schedules) {
  const shown = schedules.map((s, i) => [panels[i], s]).filter(([, s]) => s);
  if (!shown.length) return;
  const all = shown.map(([, s]) => s);
  const timeMax = Math.max(...all.map(endOf));
  const width = Math.max(...shown.map(([panel]) => chartWidth(panel, all)));
  for (const [panel, schedule] of shown) {
    drawChart(panel, schedule, width, timeMax);
    panel.dataset.state = "done";
  }
}

function showComparison(a, b) {
  const change = (b.metrics.cost - a.metrics.cost) / a.metrics.cost;
  const word = change < 0 ? "faster" : change > 0 ? "slower" : "the same";
  const text = change === 0
    ? `${$("method-b").value} has the same cost as ${$("method-a").value}.`
    : `${$("method-b").value} is ${pct(Math.abs(change))} ${word} than ${$("method-a").value}` +
      ` (cost ${num(b.metrics.cost)} vs ${num(a.metrics.cost)}).`;
  $("comparison").textContent = text;
  $("comparison").hidden = false;
}

// Each distinct message once, naming every method it came from.
function showError(message, method) {
  const methods = errors.get(message) || [];
  if (method && !methods.includes(method)) methods.push(method);
  // In the form's order, whichever answer came first.
  const order = [$("method-a").value, $("method-b").value];
  methods.sort((x, y) => order.indexOf(x) - order.indexOf(y));
  errors.set(message, methods);
  $("error").textContent = [...errors]
    .map(([text, from]) => (from.length ? `${from.join(", ")}: ${text}` : text)).join("\n");
  $("error").hidden = false;
}

function hideError() {
  errors.clear();
  $("error").hidden = true;
  $("error").textContent = "";
}

init();
