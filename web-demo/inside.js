// What is inside a task (issue 26): its steps, its budget against what it
// used and holds, the external writes it made, and, once it ended, its
// timeline and (cancelled) what the cancel did. Rendering only. The
// steps, budget and effects come from the views the server sent
// (net.js `viewOf`: the client itself does not carry them yet); the
// timeline and the cancel report from GET /v1/tasks/{id}/timeline, which
// core writes. The `data-*` attributes are the contract with
// tests/e2e/report.test.mjs.

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** The card's "inside" section, made on first use. */
function sectionOf(card) {
  let box = card.root.querySelector('[data-part="inside"]');
  if (!box) {
    box = el("section", "inside");
    box.dataset.part = "inside";
    card.root.append(box);
  }
  return box;
}

/** Shows the steps, the budget and the effects of `view` (a raw task view). */
export function showInside(card, view) {
  if (!view || !Array.isArray(view.steps)) return;
  const box = sectionOf(card);
  const steps = el("ol", "steps");
  for (const s of view.steps) {
    const item = el("li", `step step-${s.status}`, `${s.name}: ${s.status}${s.label && s.status === "running" ? ` (${s.label})` : ""}`);
    if (s.usage) item.title = `${s.usage.tokens} tokens`;
    steps.append(item);
  }
  const max = view.budget?.maxTokens;
  const used = view.used?.tokens ?? 0;
  const held = view.reserved?.tokens ?? 0;
  const budget = el("div", "budget", max === undefined ? `${used} tokens used` : `${used} of ${max} tokens used, ${held} reserved`);
  if (max !== undefined) {
    const bar = el("div", "budget-bar");
    const fill = el("div", "budget-used");
    fill.style.width = `${Math.min(100, (100 * used) / max)}%`;
    const reserved = el("div", "budget-reserved");
    reserved.style.width = `${Math.min(100 - Math.min(100, (100 * used) / max), (100 * held) / max)}%`;
    bar.append(fill, reserved);
    budget.append(bar);
  }
  const effects = (view.effects ?? []).map((e) => `${e.step}/${e.action} → ${e.resourceId}`);
  const writes = el("div", "effects", effects.length ? `external writes: ${effects.join(", ")}` : "no external write yet");
  const old = box.querySelector(".now");
  const now = el("div", "now");
  now.append(steps, budget, writes);
  if (old) old.replaceWith(now);
  else box.prepend(now);
  Object.assign(card.root.dataset, {
    steps: view.steps.map((s) => `${s.name}:${s.status}`).join(","),
    used: String(used),
    reserved: String(held),
    budget: max === undefined ? "" : String(max),
    effects: (view.effects ?? []).map((e) => e.resourceId).join(","),
  });
}

/** Shows a timeline answer: one line per change, and the cancel report. */
export function showTimeline(card, answer) {
  const box = sectionOf(card);
  box.querySelector(".history")?.remove();
  const history = el("details", "history");
  history.open = true;
  history.append(el("summary", "", `timeline: ${answer.entries.length} changes`));
  const list = el("ol", "timeline-list");
  for (const e of answer.entries) {
    const parts = [`v${e.version}`, e.kind];
    if (e.step) parts.push(e.step);
    if (e.attempt) parts.push(`attempt ${e.attempt}`);
    if (e.durationMs !== undefined) parts.push(`${Math.round(e.durationMs)} ms`);
    if (e.usage) parts.push(`${e.usage.tokens} tokens`);
    if (e.detail) parts.push(e.detail);
    list.append(el("li", `tl-${e.kind.replace(/[._]/g, "-")}`, parts.join(" · ")));
  }
  history.append(list);
  const report = answer.cancelReport;
  if (report) {
    const lines = [
      ["finished", report.finished.join(", ") || "none"],
      ["interrupted", report.interrupted.join(", ") || "none"],
      ["never run", report.notRun.join(", ") || "none"],
      ["external writes", report.effects.map((e) => `${e.step}/${e.action} ${e.resourceId}`).join(", ") || "none"],
      ["kept", report.kept.map((k) => `${k.step}: ${k.outputRef}`).join(", ") || "none"],
    ];
    const cancel = el("dl", "cancel-report");
    for (const [name, value] of lines) cancel.append(el("dt", "", name), el("dd", "", value));
    history.append(el("h4", "", "What the cancel did"), cancel);
    card.root.dataset.cancelReport = `finished=${report.finished.join("|")};interrupted=${report.interrupted.join("|")};notRun=${report.notRun.join("|")};effects=${report.effects.length}`;
  }
  box.append(history);
  card.root.dataset.timeline = answer.entries.map((e) => e.kind).join(",");
}
