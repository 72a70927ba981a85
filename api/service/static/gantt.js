// The page's Gantt chart, drawn in the browser from a schedule's JSON (start and end of
// every op), so that compared charts share one time scale and the labels are sized for the
// width they are shown at. The service's own SVG (/v1/schedules/{id}.svg) is the download.
"use strict";

const GANTT = {
  left: 64, right: 16, top: 26, lane: 22, laneGap: 4, axis: 44, font: 11,
  colours: { F: "#3b75af", B: "#2a9d8f", W: "#e69b2d", BW: "#8263b5", FB: "#c2477a" },
  names: { F: "F forward", B: "B backward (input)", W: "W backward (weights)",
           BW: "BW backward (fused)", FB: "FB forward + backward" },
  unit: "time (the profile's unit: ms for the paper's profiles)",
};

const SVG_NS = "http://www.w3.org/2000/svg";

function svgElement(name, attributes, text) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

// A tick step of 1, 2 or 5 x 10^k giving about `target` ticks (as solver/render/svg.py).
function niceStep(total, target = 10) {
  if (!(total > 0)) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(total / target));
  let best = magnitude;
  for (const scale of [0.1, 1, 10]) {
    for (const f of [1, 2, 5]) {
      const step = f * magnitude * scale;
      const score = Math.abs(Math.floor(total / step + 1e-9) + 1 - target);
      const bestScore = Math.abs(Math.floor(total / best + 1e-9) + 1 - target);
      if (score < bestScore || (score === bestScore && step < best)) best = step;
    }
  }
  return best;
}

// Later chunks of a rank are lighter (stage order on the rank), as in the service's SVG.
function shade(colour, chunk, chunks) {
  if (chunks <= 1 || chunk <= 0) return colour;
  const amount = 0.55 * Math.min(chunk, chunks - 1) / (chunks - 1);
  return "#" + [1, 3, 5].map((i) => {
    const c = parseInt(colour.slice(i, i + 2), 16);
    return Math.round(c + (255 - c) * amount).toString(16).padStart(2, "0");
  }).join("");
}

function textColour(fill) {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(fill.slice(i, i + 2), 16));
  return 0.299 * r + 0.587 * g + 0.114 * b > 150 ? "#111111" : "#ffffff";
}

// The label of an op that fits its bar: the microbatch number at 11 px, else at 8 px;
// nothing when even that does not fit (the tooltip still names it).
function labelSize(text, width) {
  if (width >= text.length * 6.6 + 4) return 11;
  if (width >= text.length * 4.9 + 2) return 8;
  return 0;
}

// Each scheduled microbatch's size relative to the mean (its F + B + W time over all
// stages, as solver/render/sizes.py), in the schedule's numbering (op microbatch j is input
// microbatch microbatch_order[j]); null when the microbatches are alike (DESIGN.md 6.2).
function microbatchSizes(schedule) {
  const p = schedule.profile;
  const m = p.num_microbatches;
  const stages = p.num_ranks * (p.num_chunks || 1);
  const at = (value, s, j) => {
    if (!Array.isArray(value)) return value;
    return Array.isArray(value[s]) ? value[s][j] : value[s];
  };
  const scale = (j) => {
    const entry = p.microbatches ? p.microbatches[j] : null;
    if (entry === null || entry === undefined) return 1;
    return typeof entry === "number" ? entry : (entry.scale ?? 1);
  };
  const totals = [];
  for (let j = 0; j < m; j++) {
    let total = 0;
    for (let s = 0; s < stages; s++) total += at(p.t_f, s, j) + at(p.t_b, s, j) + at(p.t_w, s, j);
    totals.push(total * scale(j));
  }
  const mean = totals.reduce((a, b) => a + b, 0) / m;
  if (!(mean > 0) || totals.every((t) => Math.abs(t - mean) <= 1e-9 * mean)) return null;
  const order = schedule.microbatch_order;
  return totals.map((_, j) => totals[order ? order[j] : j] / mean);
}

// A size for labels: two significant digits ("1.7x").
function sizeLabel(size) {
  return `${Number(size.toPrecision(2))}x`;
}

// Draw `schedule` `width` px wide with `timeMax` at the right edge (the largest end of the
// schedules shown together), so that equal times have equal lengths in every chart.
function drawGantt(schedule, width, timeMax) {
  const g = GANTT;
  const ranks = schedule.ranks;
  const plot = Math.max(200, width - g.left - g.right);
  const x = (t) => g.left + (t / timeMax) * plot;
  const lanesBottom = g.top + ranks.length * (g.lane + g.laneGap);
  const height = lanesBottom + g.axis;
  const svg = svgElement("svg", { xmlns: SVG_NS, width, height, viewBox: `0 0 ${width} ${height}`,
                                  "font-family": "DejaVu Sans, Helvetica, Arial, sans-serif",
                                  "font-size": g.font, "data-time-max": timeMax,
                                  "data-px-per-unit": plot / timeMax });
  const step = niceStep(timeMax);
  const decimals = Math.max(0, -Math.floor(Math.log10(step)));
  const ticks = [];
  for (let t = 0; t <= timeMax + 1e-9 * step; t += step) ticks.push(t);
  for (const t of ticks) {
    svg.append(svgElement("line", { x1: x(t), y1: g.top - 3, x2: x(t), y2: lanesBottom,
                                    stroke: "#e4e4e4" }));
  }
  // Legend: the kinds that occur.
  const kinds = Object.keys(g.colours).filter((k) => ranks.some((r) => r.some((op) => op.kind === k)));
  let lx = g.left;
  for (const kind of kinds) {
    svg.append(svgElement("rect", { x: lx, y: 4, width: 12, height: 12, fill: g.colours[kind] }));
    svg.append(svgElement("text", { x: lx + 16, y: 14, class: "legend" }, g.names[kind]));
    lx += 16 + g.names[kind].length * 6.4 + 16;
  }
  const chunks = schedule.profile.num_chunks || 1;
  const sizes = microbatchSizes(schedule);  // null: alike microbatches, plain labels
  ranks.forEach((ops, r) => {
    const y = g.top + r * (g.lane + g.laneGap);
    svg.append(svgElement("text", { x: g.left - 8, y: y + g.lane / 2 + 4, "text-anchor": "end" },
                          `rank ${r}`));
    const stages = [...new Set(ops.map((op) => op.stage))].sort((a, b) => a - b);
    for (const op of ops) {
      const x0 = x(op.start);
      const w = Math.max(0, x(op.end) - x0);
      const fill = shade(g.colours[op.kind] || "#777777", stages.indexOf(op.stage), chunks);
      const rect = svgElement("rect", { class: "op", "data-kind": op.kind,
                                        "data-microbatch": op.microbatch, x: x0, y,
                                        width: w, height: g.lane, fill, stroke: "#ffffff",
                                        "stroke-width": 0.5 });
      let tip = `rank ${r}: ${op.kind}${op.microbatch} stage ${op.stage} [${op.start}, ${op.end}]`;
      let text = String(op.microbatch);
      if (sizes) {
        const input = schedule.microbatch_order ? schedule.microbatch_order[op.microbatch]
                                                : op.microbatch;
        rect.setAttribute("data-size", sizes[op.microbatch].toFixed(4));
        tip += `, size ${sizeLabel(sizes[op.microbatch])} the mean, input microbatch ${input}`;
        const sized = `${text} (${sizeLabel(sizes[op.microbatch])})`;
        if (labelSize(sized, w)) text = sized;
      }
      rect.append(svgElement("title", {}, tip));
      svg.append(rect);
      const size = labelSize(text, w);
      if (size) {
        svg.append(svgElement("text", { class: "label", x: x0 + w / 2, y: y + g.lane / 2 + size * 0.36,
                                        "font-size": size, "text-anchor": "middle",
                                        fill: textColour(fill), "pointer-events": "none" }, text));
      }
    }
  });
  const axisY = lanesBottom + 2;
  svg.append(svgElement("line", { x1: g.left, y1: axisY, x2: g.left + plot, y2: axisY,
                                  stroke: "#333333" }));
  for (const t of ticks) {
    svg.append(svgElement("line", { x1: x(t), y1: axisY, x2: x(t), y2: axisY + 5, stroke: "#333333" }));
    svg.append(svgElement("text", { class: "tick", x: x(t), y: axisY + 17, "text-anchor": "middle" },
                          t.toFixed(decimals)));
  }
  svg.append(svgElement("text", { class: "axis-title", x: g.left + plot / 2, y: axisY + 34,
                                  "text-anchor": "middle", fill: "#555555" }, g.unit));
  return svg;
}
