// modelport console: small progressive enhancements; every page works without them.
"use strict";
document.addEventListener("click", (event) => {
  const button = event.target.closest("button.copy");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source || !navigator.clipboard) return;
  navigator.clipboard.writeText(source.textContent).then(() => {
    button.textContent = "Copied";
  });
});
document.addEventListener("submit", (event) => {
  const form = event.target.closest("form.confirm");
  if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
});

// The playground's Run button names what it runs: the page's version, or the task alias
// when the routing box is ticked.
const runButton = document.querySelector("button[data-routed]");
const routeBox = document.getElementById("route-on");
if (runButton && routeBox) {
  routeBox.addEventListener("change", () => {
    runButton.textContent = routeBox.checked ? runButton.dataset.routed : runButton.dataset.own;
  });
}

// The chat box: the conversation kept in the page, each answer streamed as JSON lines.
function money(micros) {
  if (micros === null || micros === undefined) return "free";
  return "$" + (micros / 1e6).toFixed(6);
}
const chatForm = document.querySelector("form[data-chat]");
if (chatForm) {
  const turns = [];
  const log = document.getElementById("chat-log");
  const input = document.getElementById("chat-input");
  const error = document.getElementById("chat-error");
  const facts = document.getElementById("chat-facts");
  const send = chatForm.querySelector("button[type=submit]");
  const addTurn = (role, text) => {
    const item = document.createElement("li");
    item.className = "turn turn-" + role;
    const who = document.createElement("strong");
    who.textContent = role === "user" ? "You: " : "Model: ";
    const body = document.createElement("span");
    body.className = "turn-text";
    body.textContent = text;
    item.append(who, body);
    log.append(item);
    return body;
  };
  chatForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    error.hidden = true;
    turns.push({ role: "user", content: text });
    addTurn("user", text);
    input.value = "";
    send.disabled = true;
    const answer = addTurn("assistant", "");
    const body = new FormData();
    body.append("csrf_token", chatForm.elements.csrf_token.value);
    body.append("messages", JSON.stringify(turns));
    // The routing box, when the page has one: the platform picks the model.
    const routed = chatForm.elements.route;
    if (routed && routed.checked) {
      body.append("route", "1");
      for (const name of ["prefer", "max_price", "max_latency_ms", "min_score"]) {
        body.append(name, chatForm.elements[name].value);
      }
    }
    try {
      const response = await fetch(chatForm.action, { method: "POST", body, credentials: "same-origin" });
      if (!response.ok) {
        const problem = await response.json().catch(() => ({}));
        throw new Error((problem.error || "HTTP " + response.status) + (problem.code ? " (" + problem.code + ")" : ""));
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let pending = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        pending += decoder.decode(value, { stream: true });
        let end;
        while ((end = pending.indexOf("\n")) >= 0) {
          const line = JSON.parse(pending.slice(0, end));
          pending = pending.slice(end + 1);
          if (line.delta) answer.textContent += line.delta;
          if (line.error) throw new Error(line.error);
          if (line.done) {
            document.getElementById("chat-served").textContent = line.model || "";
            document.getElementById("chat-latency").textContent = line.latency_ms;
            const usage = line.usage || {};
            document.getElementById("chat-tokens").textContent =
              (usage.prompt_tokens || 0) + " in, " + (usage.completion_tokens || 0) + " out";
            document.getElementById("chat-price").textContent = money(line.price_micros);
            facts.hidden = false;
          }
        }
      }
      turns.push({ role: "assistant", content: answer.textContent });
    } catch (failure) {
      turns.pop();
      answer.parentElement.remove();
      error.textContent = failure.message;
      error.hidden = false;
    } finally {
      send.disabled = false;
      input.focus();
    }
  });
}

// A live job's page: its details fetched again every few seconds and swapped in place
// (not while focus is inside them), the new state announced; it stops once the job ends.
const live = document.querySelector("[data-refresh]");
if (live) {
  const seconds = Math.max(1, Number(live.dataset.refresh) || 3);
  const announce = document.getElementById("job-announce");
  const poll = async () => {
    if (live.contains(document.activeElement)) return true;
    const response = await fetch(window.location.href, { credentials: "same-origin" });
    if (!response.ok) return false;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    const next = fresh.getElementById(live.id);
    if (!next) return false;
    const before = document.getElementById("job-state")?.textContent;
    live.innerHTML = next.innerHTML;
    const after = document.getElementById("job-state")?.textContent;
    if (announce && after && after !== before) announce.textContent = "Job " + after;
    return next.hasAttribute("data-refresh");
  };
  const tick = () => {
    poll().then((again) => {
      if (again) window.setTimeout(tick, seconds * 1000);
      else live.removeAttribute("data-refresh");
    }, () => window.setTimeout(tick, seconds * 1000 * 4));
  };
  window.setTimeout(tick, seconds * 1000);
}
