// The event log: one <li> per line, newest first. Each line carries its
// facts as data-* attributes (kind, task, mode, versions) so tests read
// what happened, not the wording.

const MAX_LINES = 400;

export class EventLog {
  #list;

  constructor(list) {
    this.#list = list;
  }

  /**
   * Adds a line. `kind`: resume | live | reject | conn | net | deliver |
   * cancel | decide | executor | info | error. `facts` become data-* attributes (taskId, mode, …);
   * `facts.label` names the task in the line.
   */
  add(kind, text, facts = {}) {
    const li = document.createElement("li");
    li.className = `log-line log-${kind}`;
    li.dataset.kind = kind;
    const time = document.createElement("time");
    li.append(time);
    if (facts.label) {
      const who = document.createElement("span");
      who.className = "who";
      who.textContent = facts.label;
      li.append(who);
    }
    const what = document.createElement("span");
    what.className = "what";
    li.append(what);
    this.rewrite(li, text, facts);
    this.#list.prepend(li);
    while (this.#list.childElementCount > MAX_LINES) this.#list.lastElementChild.remove();
    return li;
  }

  /** Whether `li` is the newest line (nothing was logged after it). */
  isNewest(li) {
    return li !== undefined && this.#list.firstElementChild === li;
  }

  /** Replaces a line's text and facts, and stamps it with the time now. */
  rewrite(li, text, facts = {}) {
    for (const [key, value] of Object.entries(facts)) {
      if (value !== undefined && key !== "label") li.dataset[key] = String(value);
    }
    li.querySelector("time").textContent = new Date().toLocaleTimeString([], { hour12: false });
    li.querySelector(".what").textContent = text;
  }

  clear() {
    this.#list.replaceChildren();
  }
}
