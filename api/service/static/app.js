// The ppsched page: load the methods and the paper's example profiles, post one or two
// solves side by side, poll long (ILP) jobs, draw each returned SVG Gantt chart with its
// headline figures and download links. Plain DOM, no build step; talks only to /v1.
"use strict";

const POLL_MS = 400;
const DEFAULT_EXAMPLE = "gpt1.5b-p8-m24";

const $ = (id) => document.getElementById(id);
let examples = [];
let running = 0; // a counter so a second submit while one runs is refused, not doubled

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

async function api(path, options) {
  const response = await fetch(path, options);
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

async function init() {
  $("solve-form").addEventListener("submit", onSubmit);
  $("load-example").addEventListener("click", () => loadExample($("example").value));
  $("method-a").addEventListener("change", showMethodHelp);
  try {
    const [m, e] = await Promise.all([api("/v1/methods"), api("/v1/examples")]);
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
  }
  return profile;
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
    if (status === 202) body = await waitForJob(panel, body);
    await showSchedule(panel, method, body);
    return body;
  } catch (err) {
    panel.dataset.state = "error";
    panel.querySelector(".status").textContent = `${method}: ${err.message}`;
    showError(`${method}: ${err.message}`);
    return null;
  }
}

async function waitForJob(panel, accepted) {
  const status = panel.querySelector(".status");
  for (;;) {
    const { body: job } = await api(accepted.links.self);
    if (job.status === "done") return (await api(`/v1/schedules/${job.schedule_id}`)).body;
    if (job.status === "failed" || job.status === "cancelled") {
      const reason = job.error && typeof job.error === "object" ? job.error.message : job.error;
      throw new Error(`job ${job.status}${reason ? `: ${reason}` : ""}`);
    }
    const p = job.progress;
    status.textContent = p
      ? `${job.status}: ${num(p.elapsed_s, 1)} s, best ${num(p.best)}, bound ${num(p.bound)}, gap ${pct(p.gap)}`
      : `${job.status}...`;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

// Showing.

function resetPanel(panel, method) {
  panel.replaceChildren($("panel-template").content.cloneNode(true));
  panel.querySelector(".title").textContent = method;
  panel.querySelector(".status").textContent = "solving...";
  panel.dataset.state = "solving";
  panel.hidden = false;
}

async function showSchedule(panel, requested, schedule) {
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
  const { body: svgText } = await api(schedule.links.svg);
  const doc = new DOMParser().parseFromString(svgText, "image/svg+xml");
  if (doc.querySelector("parsererror")) throw new Error("the chart is not valid SVG");
  panel.querySelector(".chart").replaceChildren(document.importNode(doc.documentElement, true));
  panel.querySelector(".status").textContent = `schedule ${schedule.id}`;
  panel.dataset.state = "done";
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

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = false;
}

function hideError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

init();
