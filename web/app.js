// rlhf labelling page. Plain JS, no build step.
//
// Flow: the page holds the current pair (in the active <video>) and the next one (preloaded in the
// standby <video>; player.js). An answer goes into the outbox (outbox.js), which sends it to the
// server, and the standby video is swapped in at once, so the next pair plays without waiting
// for the server.
//
// The end of a run: the server then says `closing` (for a grace period it hands out no pairs but
// still stores answers). The page sends its outbox at once, shows the finished screen (built with
// textContent only), and tells the server when its outbox is empty (`/api/status?outbox=0&ended=1`,
// with this page's id in a header), so the server can stop as soon as every open page is done.
//
// An ES module (strict by default): dom.js holds the DOM helpers, status.js what the page says
// about the trainer (task, when learning starts, pacing waits, ETA, the finished screen), keys.js
// what each key does.
import { $, setText, toast } from "./dom.js";
import { keyCommand } from "./keys.js";
import { createOutbox, MAX_RETRY_MS } from "./outbox.js";
import { createPlayer } from "./player.js";
import { gradeText, isRating, renderGrades } from "./ratings.js";
import { isRatingsRun, renderFinishedScreen, renderProgressBar, renderTrainer } from "./status.js";
import { noteStatus, refreshAgentView, renderLabellers, startAgentView } from "./agent.js";

(() => {
  const params = new URLSearchParams(location.search);
  const PREFETCH = params.get("prefetch") !== "0"; // ?prefetch=0: baseline for the benchmark
  const POLL_NEXT_MS = 1500; // how often to ask for a pair while waiting for one
  const POLL_RENDERING_MS = 150; // ... while its video is being rendered
  const POLL_STATUS_MS = 2000;
  const POLL_FINAL_MS = 400; // after the end, until the final figures are read (awaitingFinal)
  const STATUS_SOON_MS = 300; // named labellers: the counts after an answer (statusSoon)
  const MIN_VIEW_MS = 250; // a second key press this soon after a swap is a double press
  const MAX_EXCLUDE = 100; // the server's limit on ?exclude=
  const PAGE_ID = randomId(); // one per page load: two tabs are two pages to the server
  // This tab's own link's token, sent with every API call: a browser keeps one token cookie, so
  // with two named labellers' tabs open, the cookie is whoever's link was opened last. (Videos,
  // which cannot carry a header, still use the cookie: any labeller's token may watch them.)
  const TOKEN = params.get("token");

  function randomId() {
    const bytes = new Uint8Array(12);
    crypto.getRandomValues(bytes); // works over plain http too, unlike crypto.randomUUID
    return "p" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  // The one sentence while the next pair is on its way (the server's NEXT_PAIR_REASON too).
  const NEXT_PAIR = "Preparing the next pair...";
  const ANSWER_TEXT = {
    left: "left is better",
    right: "right is better",
    equal: "equally good",
    skip: "can't tell (skipped)",
  };

  const state = {
    current: null, // {pair_id, video_url}
    shownAt: 0,
    upcoming: [], // pairs fetched ahead; upcoming[0] is preloaded in the standby video
    outbox: [], // {kind: "label", pair, answer, response_ms} | {kind: "undo"}
    sending: false,
    retryMs: 0,
    fetching: false,
    nextFails: 0,
    waitingReason: NEXT_PAIR,
    failed: new Set(), // pair ids whose video failed to load
    denied: null,
    labelsDone: null,
    answersSeen: 0, // answers and undos the server has confirmed (a status asked before is stale)
    requested: null,
    total: null,
    rate: 1, // set by the player: the labeller's last choice
    scrubbing: false,
    ended: null, // the status that said the run is closing; no new answers from then on
    serverGone: false, // the server stopped answering after the run ended
    diskFull: false, // the trainer's disk is full: answers wait in the outbox until "Send again"
    undoable: 0, // answers this page gave that undo can take back (Undo is disabled at 0)
    status: null, // the latest /api/status body
  };
  const timers = { fill: 0, status: 0, soon: 0 };
  const player = createPlayer(state, PREFETCH);
  const outbox = createOutbox(state, params.get("token"), {
    api,
    deny,
    diskFull,
    onLabel: onLabelAnswer,
    onUndo: onUndoAnswer,
    drained: pollStatus,
    render: renderOutbox,
  });

  // -- server ------------------------------------------------------------------------------------
  async function api(method, path, body) {
    const headers = { Accept: "application/json", "X-Rlhf-Page": PAGE_ID };
    if (TOKEN) headers.Authorization = "Bearer " + TOKEN;
    const opts = { method, credentials: "same-origin", headers };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const res = await fetch(path, opts); // throws on network failure
    let data = {};
    try {
      data = await res.json();
    } catch (err) {
      data = { message: "HTTP " + res.status };
    }
    return { ok: res.ok, status: res.status, data };
  }

  function deny(data) {
    state.denied =
      (data && data.message) ||
      "Access denied: open the full link printed in the terminal (it ends with ?token=...).";
    render();
  }

  function diskFull() {
    state.diskFull = true;
    render();
  }

  function sendAgain() {
    state.diskFull = false;
    render();
    outbox.pump();
  }

  function show(pair) {
    state.current = pair;
    state.shownAt = performance.now();
    player.show(pair);
    player.preload(state.upcoming[0]);
    render();
  }

  function onVideoError(pairId, isActive) {
    state.failed.add(pairId);
    if (isActive) render();
  }

  // -- pairs -----------------------------------------------------------------------------------------
  function heldIds() {
    const ids = state.current ? [state.current.pair_id] : [];
    for (const p of state.upcoming) ids.push(p.pair_id);
    for (const op of [...state.outbox].reverse()) if (op.kind === "label") ids.push(op.pair.pair_id);
    return ids;
  }

  // Returns false for a pair the page already holds (possible when a long offline outbox no
  // longer fits in the server's exclude limit).
  function accept(pair) {
    if (heldIds().includes(pair.pair_id)) return false;
    if (!state.current) show(pair);
    else {
      state.upcoming.push(pair);
      player.preload(state.upcoming[0]);
    }
    return true;
  }

  function scheduleFill(ms) {
    clearTimeout(timers.fill);
    timers.fill = setTimeout(fillQueue, ms);
  }

  async function fillQueue() {
    clearTimeout(timers.fill);
    if (state.fetching || state.denied || state.ended) return;
    if (state.current && state.upcoming.length >= 1) return;
    state.fetching = true;
    let delay = POLL_NEXT_MS;
    try {
      const exclude = heldIds().slice(0, MAX_EXCLUDE).join(",");
      const res = await api("GET", "/api/next?exclude=" + exclude);
      if (res.status === 401 || res.status === 403) return deny(res.data);
      if (!res.ok) throw new Error(res.data.message || "HTTP " + res.status);
      state.nextFails = 0;
      if (res.data.pair) {
        if (accept(res.data.pair)) delay = 0;
      } else if (res.data.status && res.data.status.closing) {
        enterEnded(res.data.status);
      } else {
        state.waitingReason = res.data.reason;
        if (res.data.status) renderStatus(res.data.status);
        // A video being rendered is ready within a second: ask again soon, not at the idle pace.
        if (res.data.state === "rendering") delay = POLL_RENDERING_MS;
      }
    } catch (err) {
      state.nextFails += 1;
      state.waitingReason = "Can't reach the labelling server; retrying...";
      delay = Math.min(POLL_NEXT_MS * 2 ** state.nextFails, MAX_RETRY_MS);
    } finally {
      state.fetching = false;
      render();
    }
    if (state.ended) return;
    if (delay === 0) fillQueue();
    else scheduleFill(delay);
  }

  function advance() {
    const next = state.upcoming.shift();
    if (next) show(next);
    else {
      state.current = null;
      player.pause();
      state.waitingReason = NEXT_PAIR;
      render();
    }
    fillQueue();
  }

  function bringBack(pair) {
    state.upcoming = state.upcoming.filter((p) => p.pair_id !== pair.pair_id);
    if (state.current && state.current.pair_id !== pair.pair_id) state.upcoming.unshift(state.current);
    state.failed.delete(pair.pair_id);
    show(pair);
  }

  // -- answers and the outbox ------------------------------------------------------------------------
  function answer(value, grade) {
    const pair = state.current;
    if (!pair || state.denied || state.ended || state.diskFull) return;
    // A clip to rate takes a grade (or a skip: grade null), a pair anything but a grade.
    if (isRating(pair) !== (value === "grade" || (value === "skip" && isRating(pair)))) return;
    const failed = state.failed.has(pair.pair_id);
    if (value !== "skip" && failed) return;
    const shownFor = performance.now() - state.shownAt;
    if (shownFor < MIN_VIEW_MS && !failed) return;
    const op = { kind: "label", pair, answer: value, response_ms: Math.round(shownFor) };
    if (isRating(pair)) op.grade = value === "skip" ? null : grade;
    state.outbox.push(op);
    state.undoable += 1;
    outbox.save();
    advance();
    outbox.pump();
  }

  function undo() {
    if (state.denied || state.ended || state.diskFull || state.undoable === 0) return;
    state.undoable -= 1;
    const unsent = outbox.takeBackUnsent(); // the server never saw it: take it back here
    if (unsent) {
      bringBack(unsent.pair);
      toast("Undone: pair #" + unsent.pair.pair_id + " is back", "info");
      return;
    }
    state.outbox.push({ kind: "undo" });
    outbox.pump();
  }

  function onLabelAnswer(op, res) {
    const id = op.pair.pair_id;
    if (res.ok) {
      if (typeof res.data.labels_done === "number") state.labelsDone = res.data.labels_done;
      state.answersSeen += 1;
      const said = op.grade !== undefined ? gradeText(op) : ANSWER_TEXT[op.answer];
      toast("Saved #" + id + ": " + said + " \u2713");
      statusSoon();
    } else if (res.status === 409 || res.status === 404) {
      // The server's sentence: true, and it never says what anyone else answered.
      state.undoable = Math.max(0, state.undoable - 1);
      toast(res.data.message || "Pair #" + id + " was not stored.", "error", 4000);
    } else {
      toast("Could not save pair #" + id + ": " + (res.data.message || res.status), "error", 5000);
    }
    renderProgress();
  }

  function onUndoAnswer(res) {
    if (state.ended) {
      toast(res.ok ? "Undone" : "Nothing to undo", "info");
      renderProgress();
    } else if (res.ok && res.data.pair) {
      if (typeof res.data.labels_done === "number") state.labelsDone = res.data.labels_done;
      state.answersSeen += 1;
      bringBack(res.data.pair);
      toast("Undone: pair #" + res.data.pair.pair_id + " is back", "info");
      statusSoon();
      renderProgress();
    } else {
      if (res.status === 409) state.undoable = 0;
      toast(res.status === 409 ? "Nothing to undo" : "Undo failed: " + res.data.message, "info");
    }
    render();
  }

  // -- status --------------------------------------------------------------------------------------
  // Each poll also reports this page's outbox, so the server knows when it may stop at the end,
  // and the pair on screen, so its lease lasts while a person watches it. Only that one: a pair
  // queued behind it that nobody is looking at goes to another labeller when its lease runs out.
  async function pollStatus() {
    clearTimeout(timers.status);
    const held = state.current ? "&held=" + state.current.pair_id : "";
    const report = "?outbox=" + state.outbox.length + (state.ended ? "&ended=1" : "") + held;
    const answersSeen = state.answersSeen;
    try {
      const res = await api("GET", "/api/status" + report);
      if (res.status === 401 || res.status === 403) return deny(res.data);
      if (res.ok) {
        // A tab that outlived its run: the run is served here again (resumed, or `rlhf serve`).
        if (state.ended && state.serverGone && !res.data.closing && !ENDED.has(res.data.phase)) {
          location.reload();
          return;
        }
        state.serverGone = false;
        // A status asked before an answer was confirmed counts the labels from before it.
        renderStatus(res.data, state.answersSeen !== answersSeen);
        if (res.data.closing) enterEnded(res.data);
        else if (res.data.ready > 0 && !state.current) fillQueue();
      }
    } catch (err) {
      state.serverGone = true; // the header says so, or after the end, still "finished"
      renderProgress();
      if (state.ended) renderFinished();
    }
    clearTimeout(timers.status);
    timers.status = setTimeout(pollStatus, awaitingFinal() ? POLL_FINAL_MS : POLL_STATUS_MS);
  }

  // A finished run's final figures (summary.json's) follow its end within seconds, and its server
  // waits only briefly for the pages to read them: ask often until they are here.
  const awaitingFinal = () =>
    state.ended && !state.serverGone && state.ended.phase === "finished" && !state.ended.final;

  // Named labellers' counts (the Labellers box) come with the status: read it soon after an answer
  // is saved, not up to 2 s later, so they agree with the progress box. One read per 300 ms at most.
  function statusSoon() {
    if (!state.status || !state.status.labellers || state.ended || timers.soon) return;
    timers.soon = setTimeout(() => {
      timers.soon = 0;
      pollStatus();
    }, STATUS_SOON_MS);
  }

  // -- the end of the run ----------------------------------------------------------------------------
  function enterEnded(s) {
    const first = !state.ended;
    state.ended = s;
    if (first) {
      clearTimeout(timers.fill);
      player.stop();
      document.body.classList.add("ended");
      $("finished").hidden = false;
      state.retryMs = 0;
      outbox.pump(); // unsent answers go now, not after a backoff wait
      if (state.outbox.length === 0) pollStatus(); // nothing to send: say "done" right away
      refreshAgentView();
    }
    renderFinished();
  }

  const renderFinished = () => renderFinishedScreen(state);
  const ENDED = new Set(["finished", "interrupted", "crashed"]);

  function renderStatus(s, staleCount = false) {
    state.status = s;
    if (!staleCount) state.labelsDone = s.labels_done;
    state.requested = s.labels_requested;
    state.total = s.total_labels;
    if (state.ended) state.ended = s; // the final figures (summary.json's) replace the first
    renderTrainer(s, state);
    renderLabellers(s);
    noteStatus(s);
    if (state.ended) renderFinished();
  }

  const renderProgress = () => renderProgressBar(state);

  function renderOutbox() {
    if (state.ended) renderFinished();
    const n = state.outbox.filter((op) => op.kind === "label").length;
    let text = "";
    if (state.diskFull) {
      text = n + " unsaved: the trainer's disk is full";
    } else if (state.retryMs > 0) {
      text = "Connection lost: " + n + " unsaved, retrying in " + Math.round(state.retryMs / 1000) + " s";
    } else if (n > 1) {
      text = "Saving " + n + " labels...";
    }
    setText("outbox-text", text);
  }

  // -- rendering -------------------------------------------------------------------------------------

  function overlayState() {
    if (state.denied) return ["error", state.denied];
    if (state.diskFull) {
      const n = state.outbox.filter((op) => op.kind === "label").length;
      const kept = n === 1 ? "Your last answer is" : n + " answers are";
      return [
        "error",
        "The trainer's disk is full: " + kept + " not saved yet, and kept in this page. Free some" +
          " space on the trainer's machine, then press \u201cSend again\u201d.",
      ];
    }
    if (!state.current) return ["waiting", state.waitingReason];
    if (state.failed.has(state.current.pair_id)) {
      return ["error", "This video could not be loaded. Press \u201cCan't tell\u201d (Space) to skip it."];
    }
    return [null, ""];
  }

  function render() {
    const [kind, text] = overlayState();
    const overlay = $("overlay");
    overlay.hidden = kind === null;
    overlay.className = "overlay" + (kind ? " " + kind : "");
    setText("overlay-text", text);
    const pair = state.current;
    const playable = pair && !state.denied && !state.diskFull && !state.failed.has(pair.pair_id);
    for (const id of ["btn-left", "btn-right", "btn-equal"]) $(id).disabled = !playable;
    $("btn-skip").disabled = !pair || !!state.denied || state.diskFull;
    $("btn-undo").disabled = !!state.denied || state.diskFull || state.undoable === 0;
    $("btn-resend").hidden = !state.diskFull;
    $("play").disabled = !playable;
    $("scrub").disabled = !playable;
    renderGrades(pair, playable, (grade) => answer("grade", grade), isRatingsRun(state.status));
    setText("pair-id", pair ? (isRating(pair) ? "clip #" : "pair #") + pair.pair_id : "");
    $("screen").dataset.pairId = pair ? String(pair.pair_id) : "";
    renderOutbox();
  }

  // -- input ---------------------------------------------------------------------------------------
  function onKeyDown(e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const command = keyCommand(e, state.current);
    if (!command) return;
    e.preventDefault();
    if (e.repeat) return; // holding a key must not label a run of pairs
    if (command.undo) undo();
    else if (command.togglePlay) player.togglePlay();
    else answer(command.answer, command.grade);
  }

  function bind() {
    document.addEventListener("keydown", onKeyDown);
    document.addEventListener("click", (e) => {
      // After a mouse click, give focus back to the page so Space and arrows label again.
      const button = e.target.closest("button");
      if (button && e.detail > 0) button.blur();
    });
    for (const b of document.querySelectorAll(".choice[data-answer]")) {
      b.addEventListener("click", () => answer(b.dataset.answer));
    }
    $("btn-undo").addEventListener("click", undo);
    $("btn-resend").addEventListener("click", sendAgain);
    player.bind(onVideoError);
    window.addEventListener("beforeunload", (e) => {
      if (state.outbox.some((op) => op.kind === "label")) e.preventDefault();
    });
  }

  function start() {
    bind();
    outbox.restore();
    state.undoable = state.outbox.filter((op) => op.kind === "label").length; // kept from before
    render();
    fillQueue();
    pollStatus();
    outbox.pump();
    startAgentView(api);
  }

  start();
})();
