// The outbox: answers (and undos) the server has not acknowledged yet. They are sent one at a
// time and retried with backoff until the server answers; the server is idempotent by pair id,
// so re-sending is always safe. Unsent answers are kept in localStorage across reloads, under a
// key of their own per link, so named labellers sharing a browser never send each other's.
import { readStorage } from "./dom.js";

export const MAX_RETRY_MS = 10000;
const END_RETRY_MS = 250; // once the run has ended the server stays up only briefly

// A short tag of the link's token (FNV-1a), so the token itself is not written to storage.
function linkTag(token) {
  if (!token) return "";
  let h = 0x811c9dc5;
  for (const c of token) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
  return "." + h.toString(16);
}

function labelBody(op) {
  const body = { pair_id: op.pair.pair_id, response_ms: op.response_ms };
  if (op.grade !== undefined) body.grade = op.grade; // a clip's grade (null: skipped)
  else body.answer = op.answer;
  return body;
}

// hooks: api(method, path, body), deny(data), diskFull(data) (the trainer's disk is full: the
// answer stays queued, and is sent again only when the person asks), onLabel(op, res),
// onUndo(res), drained() (the run has ended and nothing is left to send), render() (the outbox
// line changed).
export function createOutbox(state, token, hooks) {
  const key = "rlhf.outbox." + location.host + linkTag(token);
  let timer = 0;

  function save() {
    const labels = state.outbox
      .filter((op) => op.kind === "label")
      .map(({ pair, answer, response_ms, grade }) => ({ kind: "label", pair, answer, response_ms, grade }));
    try {
      if (labels.length) localStorage.setItem(key, JSON.stringify(labels));
      else localStorage.removeItem(key);
    } catch (err) {
      /* storage full or disabled: the in-memory outbox still retries */
    }
  }

  function restore() {
    try {
      const saved = JSON.parse(readStorage(key) || "[]");
      if (Array.isArray(saved)) state.outbox = saved.filter((op) => op && op.pair && op.answer);
    } catch (err) {
      state.outbox = [];
    }
  }

  // The last answer, taken back if it has not been sent yet (null: it has, or there is none).
  function takeBackUnsent() {
    const last = state.outbox[state.outbox.length - 1];
    if (!last || last.kind !== "label" || last.inFlight) return null;
    state.outbox.pop();
    save();
    return last;
  }

  async function pump() {
    clearTimeout(timer);
    if (state.sending || state.denied || state.outbox.length === 0) return hooks.render();
    const op = state.outbox[0];
    state.sending = true;
    op.inFlight = true;
    let res;
    try {
      res =
        op.kind === "label"
          ? await hooks.api("POST", "/api/label", labelBody(op))
          : await hooks.api("POST", "/api/undo", {});
    } catch (err) {
      res = null; // network failure: keep it queued
    }
    state.sending = false;
    op.inFlight = false;
    if (res && (res.status === 401 || res.status === 403)) return hooks.deny(res.data);
    // Retrying cannot help until someone frees space: no backoff loop, the page says so.
    if (res && res.status === 507) return hooks.diskFull(res.data);
    if (!res || res.status >= 500 || res.status === 429) return retryLater();
    state.retryMs = 0;
    state.outbox.shift();
    save();
    if (op.kind === "label") hooks.onLabel(op, res);
    else hooks.onUndo(res);
    if (state.ended && state.outbox.length === 0) hooks.drained(); // say "done" right away
    pump();
  }

  function retryLater() {
    const backoff = Math.min(Math.max(500, state.retryMs * 2), MAX_RETRY_MS);
    state.retryMs = state.ended && !state.serverGone ? END_RETRY_MS : backoff;
    timer = setTimeout(pump, state.retryMs);
    hooks.render();
  }

  return { save, restore, pump, takeBackUnsent };
}
